import sys
from pathlib import Path

# The launcher is tested from source: it is stdlib-only, so no install is needed on the host.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "container" / "src"))
