"""Order-batch importer: loads today's orders into the warehouse staging tables.

In this environment the finalisation step exceeds the container's memory and the kernel
kills the process (SIGKILL) - after the row summary has already been printed.
Each start appends a line to .import/runs.
"""

import os
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    (HERE / ".import").mkdir(exist_ok=True)
    with open(HERE / ".import" / "runs", "a", encoding="utf-8") as runs:
        runs.write(f"start pid={os.getpid()}\n")
    for part in range(1, 5):
        print(f"import: batch part {part}/4 staged (3000 rows)", flush=True)
    print("import: 12000 rows staged, 0 rejected", flush=True)
    print("IMPORT COMPLETE", flush=True)
    # Finalising the staging index: the OOM killer ends the process here.
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
