"""Mark today's order batch as loaded (downstream jobs start from it)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    (HERE / "batch.loaded").write_text("loaded\n", encoding="utf-8")
    print("batch marked as loaded")
    sys.exit(0)
