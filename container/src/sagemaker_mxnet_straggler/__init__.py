"""Which rank is slow: every rank times its hvd.DistributedTrainer's allreduces, rank 0 combines the ranks' figures,
says in the job's log which rank (or host) the others wait for, and writes a report (the launcher's
horovod_straggler_report, on by default; docs/straggler.md). Armed in every rank by the .pth beside this package
(hook.py); the recorder (recorder.py) times and shares, figures.py combines, report.py writes, chart.py draws."""
