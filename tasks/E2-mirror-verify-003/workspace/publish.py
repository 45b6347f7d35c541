"""Publish the verified mirror snapshot (here: records the publication in .published)."""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    with open(HERE / ".published", "a", encoding="utf-8") as out:
        out.write(f"published pid={os.getpid()}\n")
    print("publish: mirror snapshot 2026-11-30T02:00Z is now live")
    sys.exit(0)
