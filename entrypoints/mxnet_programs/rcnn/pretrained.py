"""The ImageNet backbone weights GluonCV's R-CNN models start from, found locally or downloaded with
bounded waits, so that `get_model` never starts a download of its own (which has no timeout and waits up
to 300 s on a lock file)."""

import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import zipfile

from mxnet_programs.process import ProgramError

DOWNLOAD_TIMEOUT_SECONDS = 10  # per socket operation
DOWNLOAD_DEADLINE_SECONDS = 600  # whole download of a backbone (~100 MB)


def mxnet_models_dir(environ=None):
    environ = os.environ if environ is None else environ
    home = environ.get("MXNET_HOME") or os.path.join(os.path.expanduser("~"), ".mxnet")
    return os.path.join(home, "models")


def ensure_pretrained_base(network, pretrained_dir, download, env, environ=None):
    """Makes sure GluonCV finds the backbone weights locally, so `get_model` never starts a download
    of its own (which has no timeout and waits up to 300 s on a lock file).

    Order: $MXNET_HOME/models/<network>-<hash>.params; the `pretrained` channel (linked into
    $MXNET_HOME/models); a bounded download (local rank 0 of each host; the others wait for the
    file); else a one-line error saying how to provide the file.
    """
    from gluoncv.model_zoo import model_store
    from gluoncv.utils import check_sha1

    environ = os.environ if environ is None else environ
    if network not in model_store._model_sha1:
        raise ProgramError(
            f"GluonCV has no pretrained ImageNet weights for backbone '{network}'; pass --pretrained-base false")
    sha1 = model_store._model_sha1[network]
    file_name = f"{network}-{sha1[:8]}.params"
    models_dir = mxnet_models_dir(environ)
    target = os.path.join(models_dir, file_name)
    how_to = (f"put {file_name} into $MXNET_HOME/models (here {models_dir}), e.g. by adding a 'pretrained' "
              f"channel (SM_CHANNEL_PRETRAINED / --pretrained-dir) that holds the file, or pass "
              f"--pretrained-base false")

    def verified(path):
        if not check_sha1(path, sha1):
            raise ProgramError(f"pretrained weights {path} do not match GluonCV's SHA-1 {sha1}: {how_to}")
        return path

    if os.path.isfile(target):
        return verified(target)
    for candidate in (os.path.join(pretrained_dir, file_name),
                      os.path.join(pretrained_dir, "models", file_name)):
        if os.path.isfile(candidate):
            verified(candidate)
            os.makedirs(models_dir, exist_ok=True)
            _link_or_copy(candidate, target)
            return target
    if not download:
        raise ProgramError(f"pretrained backbone weights {file_name} not found in {models_dir} and "
                                  f"--download-pretrained is false: {how_to}")
    repo_url = environ.get("MXNET_GLUON_REPO", model_store.apache_repo_url)
    if not repo_url.endswith("/"):
        repo_url += "/"
    url = model_store._url_format.format(repo_url=repo_url, file_name=file_name[:-len(".params")])
    if env.local_rank == 0:
        try:
            _download_params(url, target, sha1, check_sha1)
        except (OSError, ValueError, zipfile.BadZipFile, urllib.error.URLError) as exc:
            raise ProgramError(f"pretrained backbone weights {file_name} not found in {models_dir} and the "
                                      f"GluonCV model store is unreachable ({url}: {exc}): {how_to}") from None
        return target
    deadline = time.time() + DOWNLOAD_DEADLINE_SECONDS + 60
    while not os.path.isfile(target):  # local rank 0 downloads (or fails, and mpirun ends the job)
        if time.time() > deadline:
            raise ProgramError(f"timed out waiting for local rank 0 to download {file_name}: {how_to}")
        time.sleep(1)
    return verified(target)


def _link_or_copy(source, target):
    tmp = f"{target}.tmp-{os.getpid()}"
    try:
        os.symlink(os.path.abspath(source), tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def _download_params(url, target, sha1, check_sha1):
    """Downloads GluonCV's <name>.zip with socket timeouts and an overall deadline; atomic install."""
    deadline = time.time() + DOWNLOAD_DEADLINE_SECONDS
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(target)) as tmp:
        zip_path = os.path.join(tmp, "weights.zip")
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response, open(zip_path, "wb") as out:
            while True:
                if time.time() > deadline:
                    raise OSError(f"download took longer than {DOWNLOAD_DEADLINE_SECONDS} s")
                chunk = response.read(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
        with zipfile.ZipFile(zip_path) as zf:
            zf.extract(os.path.basename(target), tmp)
        extracted = os.path.join(tmp, os.path.basename(target))
        if not check_sha1(extracted, sha1):
            raise ValueError("downloaded file has the wrong SHA-1")
        os.replace(extracted, target)
