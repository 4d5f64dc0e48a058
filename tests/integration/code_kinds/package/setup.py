from setuptools import setup

setup(name="user-trainer", version="1.2.3", py_modules=["train", "helper"])
