"""hook.py without smdebug: every way the hook is not made is one warning naming why, never an error. Making the
hook itself (smdebug, MXNet) is tested in the image: tests/programs/test_debugger.py."""

import json

from sagemaker_mxnet_debugger.hook import guarded, open_hook, writable_directory_problem


def test_no_configuration_no_hook_and_no_warning(tmp_path, capsys):
    assert open_hook("mnist", path=tmp_path / "debughookconfig.json") is None
    assert capsys.readouterr().err == ""


def test_a_configuration_that_cannot_be_used_is_one_warning(tmp_path, capsys):
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"S3OutputPath": "s3://b", "Version": "2"}))
    assert open_hook("mnist", path=path) is None
    assert capsys.readouterr().err == (
        f"mnist: warning: SageMaker Debugger: {path} unknown key(s) Version: not the DebugHookConfig this image "
        "knows (S3OutputPath, LocalPath, HookParameters, CollectionConfigurations), perhaps a newer version of it; "
        "training goes on without the hook\n")


def test_an_unwritable_local_path_is_named(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")  # unwritable as a directory, for root too
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"LocalPath": str(tmp_path / "a-file" / "tensors")}))
    assert open_hook("mnist", path=path) is None
    assert capsys.readouterr().err == (
        f"mnist: warning: SageMaker Debugger: LocalPath {tmp_path}/a-file/tensors is not writable here (Not a "
        "directory); training goes on without the hook\n")


def test_writable_directory_problem(tmp_path):
    assert writable_directory_problem(str(tmp_path / "new" / "tensors")) is None
    assert (tmp_path / "new" / "tensors").is_dir() and list((tmp_path / "new" / "tensors").iterdir()) == []
    (tmp_path / "file").write_text("")
    assert writable_directory_problem(str(tmp_path / "file" / "tensors")).startswith(
        f"LocalPath {tmp_path}/file/tensors is not writable here (Not a directory")


def test_guarded_hands_every_error_to_smdebugs_handling():
    # Only the switch; smdebug's handling at work in a job: tests/programs/test_debugger.py (a save failing mid-job).
    class Hook:
        def has_default_configuration(self):
            return False

    assert guarded(Hook()).has_default_configuration() is True
