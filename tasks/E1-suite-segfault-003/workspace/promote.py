"""Promote the tested build of the payments service to the release channel.

Usage: python3 promote.py

Writes release/promoted.json. Run it only after a test run that succeeded.
"""

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    release = HERE / "release"
    release.mkdir(exist_ok=True)
    (release / "promoted.json").write_text(json.dumps({"build": "payments-service", "channel": "stable"}) + "\n",
                                           encoding="utf-8")
    print("promoted payments-service to stable")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
