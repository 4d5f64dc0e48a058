"""tests/unit mirrors the launcher's folders (parse/, plan/, act/, diagnose/, compat/) and the image's two other
packages (mxnet_container/, mxnet_data/). This conftest puts tests/unit itself on sys.path, so every test module,
whatever its folder, imports the shared helpers beside it (unit_paths.py, plan_cases.py, live_output.py)."""
