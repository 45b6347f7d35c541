"""Cost of one process in a docker cell (prints numbers; not a timed test).

Wraps and runs ``/bin/true`` ``N`` times (default 10) in one docker sandbox, the way
:func:`harnesses.runner.run_process` runs a harness process, and prints the first process's
time (it pays the container's create and start unless a warm one was waiting), the median
and mean of the rest, and the sandbox's cleanup. To compare two checkouts, run it with each
on ``PYTHONPATH``, interleaved:

    PYTHONPATH=/path/to/checkout python benchmarks/docker_process.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from apparatus.sandbox import Confinement, confined, get_sandbox
from harnesses.runner import run_process


def main(n: int) -> int:
    import apparatus

    box = get_sandbox("docker")
    box.prepare()  # the image, as a cell's preparation phase does: not timed
    root = Path(tempfile.mkdtemp(prefix="tt-bench-docker-"))
    workspace = root / "workspace"
    workspace.mkdir()
    times: list[float] = []
    try:
        with confined(Confinement(box, writable=[root], hidden=[])):
            for _ in range(n):
                begun = time.monotonic()
                res = run_process(["/bin/true"], env={"PATH": "/usr/bin:/bin"}, cwd=workspace, stdout=root / "out",
                                  stderr=root / "err", timeout_s=60)
                times.append(time.monotonic() - begun)
                if res.exit_code != 0:
                    raise SystemExit(f"/bin/true failed: {res} {(root / 'err').read_text()}")
    finally:
        begun = time.monotonic()
        box.cleanup()
        cleanup = time.monotonic() - begun
    print(f"{Path(apparatus.__file__).resolve().parents[1]}: first {times[0]:.3f} s, rest median "
          f"{statistics.median(times[1:]):.3f} s mean {statistics.mean(times[1:]):.3f} s, total {sum(times):.2f} s, "
          f"cleanup {cleanup:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
