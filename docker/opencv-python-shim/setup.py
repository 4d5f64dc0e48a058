"""Version and dependency of the opencv-python stand-in come from the OPENCV_VERSION build arg."""

import os

from setuptools import setup

version = os.environ.get("OPENCV_VERSION")
if not version:
    raise SystemExit("opencv-python-shim: set OPENCV_VERSION (a Dockerfile ARG)")

setup(
    version=f"{version}+headless",
    install_requires=[f"opencv-python-headless=={version}"],
    packages=[],
    py_modules=[],
)
