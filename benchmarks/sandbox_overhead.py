"""Per-cell overhead of each sandbox backend against ``local`` (prints numbers; not a timed test).

Runs the same cells (default: E1 on the reference harness and Claude Code) ``--repeats``
times under every backend that works here, one cell at a time (no xdist), each repeat in
a fresh output folder with ``--tt-rerun``. The numbers are read back from the archives:
the ``execution`` phase of each cell's ``result.json`` (harness processes, gateway,
simulators — what a backend can slow down). Backends are interleaved per repeat so drift
of the machine hits them alike. The verdict vectors are compared too: a backend must not
change a verdict.

    python benchmarks/sandbox_overhead.py [--repeats 7] [--task E1-build-status-001]
                                          [--harness reference,claude_code] [--backends local,bwrap,docker]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from apparatus.sandbox import BwrapSandbox, docker_reason


def available_backends(wanted: list[str]) -> list[str]:
    ok = {"local": None, "bwrap": BwrapSandbox().available(), "docker": docker_reason()}
    for name in wanted:
        if ok.get(name):
            print(f"skipping {name}: {ok[name]}")
    return [b for b in wanted if ok.get(b, "unknown") is None]


def run_once(task: str, harnesses: str, backend: str, out: Path) -> None:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-p", "no:cacheprovider", "-q",
           "-k", task, "--tt-harness", harnesses, f"--tt-sandbox={backend}", f"--tt-output={out}", "--tt-rerun"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if "APPARATUS ERROR" in proc.stdout:
        raise SystemExit(f"apparatus error under {backend}:\n{proc.stdout[-3000:]}")


def read_cell(out: Path, task: str, harness: str) -> tuple[float, tuple[str, ...]]:
    root = next((out / "traces").glob(f"{task}*/probe/{harness}"))
    result = json.loads((root / "result.json").read_text())
    seconds = float(result["timing"]["execution"]["seconds"])
    score = json.loads((root / "artifacts" / "llm_judge" / "combined_score.json").read_text())
    failed = tuple(sorted(v["id"] for v in score["verdicts"] if not v["passed"]))
    return seconds, failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--task", default="E1-build-status-001")
    ap.add_argument("--harness", default="reference,claude_code")
    ap.add_argument("--backends", default="local,bwrap,docker")
    args = ap.parse_args()
    backends = available_backends(args.backends.split(","))
    harnesses = args.harness.split(",")
    times: dict[tuple[str, str], list[float]] = {}
    verdicts: dict[tuple[str, str], set[tuple[str, ...]]] = {}
    with tempfile.TemporaryDirectory(prefix="tt-bench-sandbox-") as tmp:
        for _warm in range(1):  # first use builds/caches images and warms the page cache
            for backend in backends:
                run_once(args.task, args.harness, backend, Path(tmp) / f"warm-{backend}")
        for rep in range(args.repeats):
            for backend in backends:
                out = Path(tmp) / f"{backend}-{rep}"
                run_once(args.task, args.harness, backend, out)
                for harness in harnesses:
                    seconds, failed = read_cell(out, args.task, harness)
                    times.setdefault((backend, harness), []).append(seconds)
                    verdicts.setdefault((backend, harness), set()).add(failed)
            print(f"repeat {rep + 1}/{args.repeats} done", flush=True)
    print(f"\ntask {args.task}, {args.repeats} repeats, execution phase of result.json (seconds)")
    print(f"{'harness':<12} {'backend':<7} {'median':>7} {'min':>7} {'max':>7} {'Δ median vs local':>18}  failed criteria")
    for harness in harnesses:
        base = statistics.median(times[("local", harness)]) if ("local", harness) in times else None
        for backend in backends:
            xs = times[(backend, harness)]
            med = statistics.median(xs)
            delta = f"{med - base:+.2f} s ({(med - base) / base * 100:+.0f}%)" if base else "-"
            seen = " / ".join(",".join(f) or "none" for f in sorted(verdicts[(backend, harness)]))
            print(f"{harness:<12} {backend:<7} {med:7.2f} {min(xs):7.2f} {max(xs):7.2f} {delta:>18}  {seen}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
