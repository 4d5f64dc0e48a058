"""SageMaker Debugger in this image: the hook configuration SageMaker writes, the smdebug hook the built-in programs
and users' scripts get from it, and the zero-code-change registration for scripts that do not make one.

  config            debughookconfig.json and profilerconfig.json: where they are, their shape, what they ask for
                    (standard library only: the launcher's start log reads them too)
  hook              an smdebug hook for this process from the job's configuration, or None and one warning line
  zero_code_change  a user's Gluon script gets a hook at its first training step (installed from a .pth file,
                    only when the job has a hook configuration)

docs/debugger.md says what each does and what was measured.
"""
