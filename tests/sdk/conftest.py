from sdk_support import compose, image, mnist_data, run_example, run_sdk  # noqa: F401 - fixtures for tests/sdk
