"""held_packages.py: the build's constraints file read, the packages a job may replace released, the other builds of
the image's modules kept out, and the constraints file pip gets."""

from sagemaker_mxnet_horovod.parse.held_packages import (
    KEPT_OUT,
    HeldPackages,
    constraints_text,
    hold,
    read_held_versions,
    unknown_replacements,
)
from sagemaker_mxnet_horovod.parse.values import ALL_PACKAGES

# As docker/held_packages.py writes it (a part of the CPU image's).
BUILD_FILE = """\
# The CPU image's Python packages, each at its installed version: a pip constraints file.
horovod==0.28.1
mxnet==1.9.1
numpy==1.23.5
opencv-python==4.11.0.86+headless
opencv-python-headless==4.11.0.86
pycocotools==2.0.11
"""
CPU = read_held_versions(BUILD_FILE)
GPU = {**{name: v for name, v in CPU.items() if name != "mxnet"}, "mxnet-cu110": "1.9.1"}


def test_the_builds_file_is_read_as_canonical_names_and_versions():
    assert CPU == {"horovod": "0.28.1", "mxnet": "1.9.1", "numpy": "1.23.5",
                   "opencv-python": "4.11.0.86+headless", "opencv-python-headless": "4.11.0.86",
                   "pycocotools": "2.0.11"}
    assert read_held_versions("OpenCV_Python.Headless == 4.11.0.86  # why\n") == {"opencv-python-headless": "4.11.0.86"}


def test_every_package_is_held_and_the_other_builds_of_its_modules_kept_out():
    held = hold(CPU, frozenset())
    assert held.versions == CPU
    cv2 = ("cv2", ("opencv-python 4.11.0.86+headless", "opencv-python-headless 4.11.0.86"))
    assert held.kept_out["opencv-contrib-python"] == held.kept_out["opencv-contrib-python-headless"] == cv2
    assert held.kept_out["mxnet-cu110"] == ("mxnet", ("mxnet 1.9.1",))
    assert "mxnet" not in held.kept_out and "opencv-python" not in held.kept_out  # installed: held at its version


def test_the_gpu_image_keeps_the_cpu_mxnet_out():
    held = hold(GPU, frozenset())
    assert held.kept_out["mxnet"] == ("mxnet", ("mxnet-cu110 1.9.1",))
    assert {"mxnet-cu112", "mxnet-mkl", "mxnet-native"} <= set(held.kept_out)
    assert "mxnet-cu110" not in held.kept_out


def test_a_replaced_package_is_released_and_a_named_build_let_in():
    held = hold(GPU, frozenset({"numpy", "mxnet-cu112"}))
    assert "numpy" not in held.versions and held.versions["horovod"] == "0.28.1"
    assert "mxnet-cu112" not in held.kept_out and "mxnet" in held.kept_out


def test_all_holds_nothing():
    held = hold(CPU, frozenset({ALL_PACKAGES}))
    assert held == HeldPackages() and not held


def test_a_name_the_image_neither_holds_nor_keeps_out_is_reported():
    assert unknown_replacements(CPU, frozenset({"nunpy", "numpy", "mxnet-cu112", "all"})) == ["nunpy"]


def test_the_constraints_file_pins_the_held_and_refuses_every_version_of_the_kept_out():
    text = constraints_text(hold(CPU, frozenset({"pycocotools"})))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines[:5] == ["horovod==0.28.1", "mxnet==1.9.1", "numpy==1.23.5", "opencv-python==4.11.0.86+headless",
                         "opencv-python-headless==4.11.0.86"]
    assert "opencv-contrib-python===kept-out-by-the-image" in lines and "mxnet-cu110" + KEPT_OUT in lines
    assert not any(line.startswith("pycocotools") for line in lines)
