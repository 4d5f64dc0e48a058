"""stray_outputs.py: files Horovod or the user's options write under /opt/ml/output but outside output/data, which
SageMaker would not upload: found in the MPI options and the environment, warned about (act/outcome_files.py
copies them at the end)."""

import pytest
from sagemaker_mxnet_horovod.plan.job_plan import describe
from sagemaker_mxnet_horovod.plan.stray_outputs import find_stray_outputs, stray_path
from unit_helpers.plan_cases import PATHS, config, options, plan


@pytest.mark.parametrize("value,copy_to", [
    ("/opt/ml/output/timeline.json", "/opt/ml/output/data/timeline.json"),
    ("/opt/ml/output/logs/autotune.csv", "/opt/ml/output/data/logs/autotune.csv"),
    ("/opt/ml/output/./x/../t.json", "/opt/ml/output/data/t.json"),
    ("/opt/ml/output/data/timeline.json", None),  # uploaded
    ("/opt/ml/output/data", None),
    ("/opt/ml/output/failure", None),
    ("/opt/ml/output/success", None),
    ("/opt/ml/output/intermediate/t.json", None),  # synced by SageMaker when sagemaker_s3_output is set
    ("/opt/ml/output/tensorboard/events", None),  # TensorBoardOutputConfig's path
    ("/opt/ml/output", None),
    ("/opt/ml/outputs/t.json", None),
    ("/opt/ml/model/t.json", None),
    ("timeline.json", None),
    ("", None),
])
def test_stray_path(value, copy_to):
    assert stray_path(PATHS, value) == copy_to


def test_stray_outputs_from_mpi_options_and_environment():
    hps = options("-x HOROVOD_TIMELINE=/opt/ml/output/timeline.json -x HOROVOD_AUTOTUNE=1 "
                  "-x MY_LOG=/opt/ml/output/my.log -x HOROVOD_AUTOTUNE_LOG")
    env = {"HOROVOD_AUTOTUNE_LOG": "/opt/ml/output/autotune_log.csv", "OTHER": "/opt/ml/output/x"}
    p = plan(config(hps), env=env)
    assert {(s.variable, s.path, s.copy_to) for s in p.stray_outputs} == {
        ("HOROVOD_TIMELINE", "/opt/ml/output/timeline.json", "/opt/ml/output/data/timeline.json"),
        ("HOROVOD_AUTOTUNE_LOG", "/opt/ml/output/autotune_log.csv", "/opt/ml/output/data/autotune_log.csv"),
        ("MY_LOG", "/opt/ml/output/my.log", "/opt/ml/output/data/my.log"),
    }  # OTHER: neither exported with -x nor a file Horovod writes
    warnings = [n for n in describe(p, env).splitlines() if "WARNING" in n]
    assert len(warnings) == 3
    timeline = next(w for w in warnings if "HOROVOD_TIMELINE" in w)
    assert ("HOROVOD_TIMELINE=/opt/ml/output/timeline.json is outside /opt/ml/output/data" in timeline
            and "copies it to /opt/ml/output/data/timeline.json when the job ends" in timeline
            and "HOROVOD_TIMELINE=/opt/ml/output/data/timeline.json (or the hyperparameter horovod_timeline: true)"
            in timeline)


def test_stray_output_from_the_job_environment_alone():
    strays = find_stray_outputs(PATHS, {}, {"HOROVOD_TIMELINE": "/opt/ml/output/t.json"})
    assert [(s.variable, s.copy_to) for s in strays] == [("HOROVOD_TIMELINE", "/opt/ml/output/data/t.json")]
    assert find_stray_outputs(PATHS, {}, {"HOROVOD_TIMELINE": "/opt/ml/output/data/t.json"}) == []


def test_a_variable_the_backend_gives_the_ranks_wins_over_environment_for_the_same_name():
    # MPI's -x HOROVOD_TIMELINE=... in the user's options (parse/mpi_options.py, backends/mpi/mpirun.host_plan)
    strays = find_stray_outputs(PATHS, {"HOROVOD_TIMELINE": "/opt/ml/output/data/t.json"},
                                {"HOROVOD_TIMELINE": "/opt/ml/output/t.json"})
    assert strays == []
