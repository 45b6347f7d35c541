"""Rotate backups: the new nightly backup replaces the previous one."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    prev, new = HERE / "backups" / "previous.tar", HERE / "backups" / "nightly.tar"
    if not new.exists():
        print("rotate: no new backup to rotate in", file=sys.stderr)
        sys.exit(1)
    prev.unlink(missing_ok=True)
    new.rename(prev)
    print("rotate: previous backup replaced by tonight's backup")
    sys.exit(0)
