import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sdk_support import compose, image, mnist_data, run_example, run_sdk  # noqa: E402, F401 - fixtures for tests/sdk
