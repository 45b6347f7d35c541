"""Where a cell's time goes, per phase and per sandbox backend (prints numbers; not a timed test).

Runs the chosen cells (default: C3, E1, L2, V4 × claude_code, codex, reference — issue 25's
twelve) once per backend, one pytest session each, ``--tt-rerun``, and reads the breakdown back
from the archives: the phases each cell's ``result.json`` times (pack copy and baseline,
workspace, simulators, sandbox preparation, gateway route, harness execution, collection,
normalization, evidence), plus what the archive cannot time about itself — sealing and scoring
and the pytest cell around it — as the rest of the cell's junit time. The first cell of a
session waits in ``gateway_route`` for the proxy to start; that one-off wait is shown on its own
and left out of the apparatus share, which is everything outside harness execution.

    python benchmarks/cell_overhead.py [--tasks C3-freeze-ticket-001,E1-build-status-001,...]
                                       [--harness claude_code,codex,reference]
                                       [--backends local,bwrap,docker] [-n N] [--rounds R] [-q]
    python benchmarks/cell_overhead.py --from OUTPUT [--junit FILE]

``--from`` runs nothing: it prints the same breakdown for an archive already written (what
``scripts/bench.sh`` prints at the end of the main job), with each harness's share.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.sandbox_overhead import available_backends  # one backend check for both benchmarks

TASKS = "C3-freeze-ticket-001,E1-build-status-001,L2-config-commit-001,V4-inbox-counts-001"
PHASES = ("pack_copy", "workspace", "simulators", "sandbox_prepare", "gateway_route", "execution", "collection",
          "normalization", "evidence")


def run_session(tasks: list[str], harnesses: str, backend: str, out: Path, workers: int) -> float:
    """One pytest session over the cells; returns its wall time."""
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-p", "no:cacheprovider", "-q",
           "-k", " or ".join(tasks), "--tt-harness", harnesses, f"--tt-sandbox={backend}", f"--tt-output={out}",
           "--tt-rerun", f"--junitxml={out / 'junit.xml'}"]
    if workers > 1:
        cmd += ["-n", str(workers)]
    begun = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600, check=False)
    wall = time.monotonic() - begun
    if "APPARATUS ERROR" in proc.stdout or proc.returncode not in (0, 1):
        raise SystemExit(f"the {backend} session did not run cleanly (pytest exit {proc.returncode}):\n"
                         f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return wall


def junit_times(out: Path, junit: Path | None = None) -> dict[str, float]:
    """Each cell's pytest time (setup, call, teardown) by test id parameter (none without a
    junit file)."""
    times: dict[str, float] = {}
    junit = junit or out / "junit.xml"
    if not junit.is_file():
        return times
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[" in name:
            times[name[name.index("[") + 1:-1]] = float(case.get("time") or 0)
    return times


def read_cells(out: Path, junit_file: Path | None = None) -> list[dict[str, object]]:
    """One row per executed cell: its phases (seconds), its junit time and its identity."""
    junit = junit_times(out, junit_file)
    # Which process ran each cell: its gateway's records are under .gateway/<worker>/<run id>
    # (an xdist worker, or "main"); each process's first cell waited for its own proxy start.
    worker_of = {run.name: run.parent.name for run in (out / ".gateway").glob("*/*")}
    rows: list[dict[str, object]] = []
    for result_file in sorted((out / "traces").glob("*/*/*/result.json")):
        result = json.loads(result_file.read_text())
        ident = result["identity"]
        timing = {k: float(v.get("seconds") or 0.0) for k, v in result.get("timing", {}).items()}
        if "execution" not in timing:
            continue  # skipped (not eligible): nothing ran
        key = f"{ident['task_id']}-{ident['harness']}-{ident['model']}"
        first = min(v["started_at"] for v in result["timing"].values())
        rows.append({"key": key, "harness": ident["harness"], "timing": timing, "total": junit.get(key),
                     "first_started": first, "failed": _failed(result_file.parent),
                     "worker": worker_of.get(str(ident["run_id"]), "")})
    return rows


def _failed(root: Path) -> tuple[str, ...] | None:
    """The ids of the cell's failed criteria (``None``: not scored)."""
    try:
        score = json.loads((root / "artifacts" / "llm_judge" / "combined_score.json").read_text())
    except (OSError, ValueError):
        return None
    return tuple(sorted(str(v["id"]) for v in score.get("verdicts", []) if not v.get("passed")))


def compare_verdicts(by_backend: dict[str, list[dict[str, object]]]) -> list[str]:
    """Cells whose failed criteria differ between backends (a backend must not change a verdict)."""
    cells: dict[str, dict[str, object]] = {}
    for backend, rows in by_backend.items():
        for r in rows:
            cells.setdefault(str(r["key"]), {})[backend] = r.get("failed")
    return [f"{key}: " + "; ".join(f"{b}={','.join(v) if isinstance(v, tuple) else v}" for b, v in seen.items())
            for key, seen in sorted(cells.items()) if len({repr(v) for v in seen.values()}) > 1]


def _proxy_waits(rows: list[dict[str, object]]) -> dict[int, float]:
    """The one-off proxy wait of each process's first cell (inside its ``gateway_route``), by row."""
    by_worker: dict[str, dict[str, object]] = {}
    for r in sorted(rows, key=lambda r: str(r["first_started"])):
        by_worker.setdefault(str(r.get("worker", "")), r)
    return {id(r): float(r["timing"]["gateway_route"]) for r in by_worker.values()}  # type: ignore[index]


def _cell_time(row: dict[str, object]) -> float:
    """A cell's time: its junit time; without one (an archive read back), the sum of its phases."""
    total = row["total"]
    return float(total) if total is not None else sum(row["timing"].values())  # type: ignore[arg-type, attr-defined]


def cell_times(rows: list[dict[str, object]]) -> dict[str, float]:
    """Each cell's time (:func:`_cell_time`), its proxy wait left out."""
    waits = _proxy_waits(rows)
    return {str(r["key"]): _cell_time(r) - waits.get(id(r), 0.0) for r in rows}


def fastest(per_round: list[dict[str, float]]) -> dict[str, float]:
    """Each cell's fastest time in any round: on a shared machine noise only adds time, so the
    minimum is the steadiest estimate of what a cell costs (a cell missing from a round counts
    from the rounds that have it)."""
    best: dict[str, float] = {}
    for times in per_round:
        for key, t in times.items():
            best[key] = min(t, best.get(key, t))
    return best


def summarize(backend: str, wall: float, rows: list[dict[str, object]], *, quiet: bool = False) -> dict[str, float]:
    """Print one backend's table (``quiet``: nothing) and return its totals."""
    say = (lambda *_a, **_k: None) if quiet else print
    waits = _proxy_waits(rows)
    proxy_wait = sum(waits.values())
    sums: dict[str, float] = {p: sum(r["timing"].get(p, 0.0) for r in rows) for p in PHASES}  # type: ignore[attr-defined]
    sums["gateway_route"] -= proxy_wait
    totals = [_cell_time(r) for r in rows]
    cell_total = sum(totals) - proxy_wait
    rest = max(cell_total - sum(sums.values()), 0.0)
    execution = sums["execution"]
    apparatus = cell_total - execution
    session = f"session wall {wall:.1f} s, " if wall else ""
    say(f"\n== {backend}: {len(rows)} cells, {session}sum of cell times {cell_total:.1f} s "
          f"(one-off proxy wait {proxy_wait:.1f} s left out"
          f"{f', {len(waits)} processes' if len(waits) > 1 else ''})")
    if any(r["total"] is None for r in rows):
        say("(cells without a junit time count their phases only: sealing, scoring and pytest are not in them)")
    say(f"{'phase':<18} {'total s':>8} {'mean s':>8} {'share':>7}")
    for phase in (*PHASES, "seal+score+pytest"):
        value = rest if phase == "seal+score+pytest" else sums[phase]
        share = value / cell_total * 100 if cell_total else 0.0
        say(f"{phase:<18} {value:8.2f} {value / len(rows):8.3f} {share:6.1f}%")
    share = apparatus / cell_total * 100 if cell_total else 0.0
    # The measure is a real CLI's cell: the reference harness's cells left out (a
    # process's first cell's proxy wait too, should it be one of them).
    real = [(t - waits.get(id(r), 0.0), r["timing"]["execution"])  # type: ignore[index]
            for r, t in zip(rows, totals) if not str(r["harness"]).startswith("reference")]
    real_total = sum(t for t, _ in real)
    real_share = (real_total - sum(e for _, e in real)) / real_total * 100 if real_total else float("nan")
    say(f"apparatus share outside harness execution: {share:.1f}% (real CLIs' cells: {real_share:.1f}%)")
    by_harness: dict[str, list[float]] = {}
    for r in rows:
        by_harness.setdefault(str(r["harness"]), []).append(r["timing"]["execution"])  # type: ignore[index]
    say("mean execution per harness: " + ", ".join(f"{h} {statistics.mean(xs):.2f} s" for h, xs in sorted(by_harness.items())))
    return {"wall": wall, "cells": cell_total, "execution": execution, "apparatus_share": share,
            "apparatus_share_real": real_share, "proxy": proxy_wait}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=TASKS, help="comma-separated task ids")
    ap.add_argument("--harness", default="claude_code,codex,reference")
    ap.add_argument("--backends", default="local,bwrap,docker")
    ap.add_argument("-n", type=int, default=1, help="xdist workers per session (default: one at a time)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every backend this many times, interleaved, and summarize the medians and "
                         "each cell's best time "
                         "(rounds on a shared machine differ by more than the backends do)")
    ap.add_argument("-q", "--quiet", action="store_true", help="only the per-round and summary tables")
    ap.add_argument("--from", dest="source", type=Path, help="summarize this output folder instead of running cells")
    ap.add_argument("--junit", type=Path, help="with --from: the session's junit file (cell times)")
    args = ap.parse_args()
    if args.source is not None:
        rows = read_cells(args.source, args.junit)
        if not rows:
            print(f"where the time went: no executed cell under {args.source / 'traces'}")
            return 0
        summarize(f"where the time went ({args.source})", 0.0, rows)
        return 0
    backends = available_backends(args.backends.split(","))
    tasks = args.tasks.split(",")
    rounds: list[dict[str, dict[str, float]]] = []
    per_cell: dict[str, list[dict[str, float]]] = {}
    changed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tt-bench-cells-") as tmp:
        for index in range(max(args.rounds, 1)):
            results: dict[str, dict[str, float]] = {}
            cells: dict[str, list[dict[str, object]]] = {}
            for backend in backends:
                out = Path(tmp) / f"{backend}-{index}"
                wall = run_session(tasks, args.harness, backend, out, args.n)
                rows = read_cells(out)
                if not rows:
                    print(f"{backend}: no cell executed")
                    continue
                results[backend] = summarize(backend if args.rounds == 1 else f"{backend}, round {index + 1}",
                                             wall, rows, quiet=args.quiet)
                cells[backend] = rows
                per_cell.setdefault(backend, []).append(cell_times(rows))
            if len(cells) > 1:
                changed += compare_verdicts(cells)
            rounds.append(results)
    if len(backends) > 1:
        print(f"\nverdicts: {'the same on every backend' if not changed else 'CHANGED on ' + str(len(changed)) + ' cells'}")
        for line in changed:
            print(f"  {line}")
    if "local" in backends:
        _ratios(rounds, per_cell)
    return 0


def _ratios(rounds: list[dict[str, dict[str, float]]], per_cell: dict[str, list[dict[str, float]]]) -> None:
    """Each round's cells time against local, and (several rounds) the medians and the best of rounds."""
    header = (f"{'backend':<8} {'round':>5} {'session s':>10} {'cells s':>8} {'exec s':>8} {'× local (cells)':>16} "
              f"{'apparatus':>10} {'(real CLIs)':>12}")
    print("\n" + header)
    ratio: dict[str, list[float]] = {}
    share: dict[str, list[float]] = {}
    real: dict[str, list[float]] = {}
    for index, results in enumerate(rounds, start=1):
        base = results.get("local")
        for backend, r in results.items():
            x = r["cells"] / base["cells"] if base and base["cells"] else float("nan")
            ratio.setdefault(backend, []).append(x)
            share.setdefault(backend, []).append(r["apparatus_share"])
            real.setdefault(backend, []).append(r["apparatus_share_real"])
            print(f"{backend:<8} {index:>5} {r['wall']:10.1f} {r['cells']:8.1f} {r['execution']:8.1f} {x:16.2f} "
                  f"{r['apparatus_share']:9.1f}% {r['apparatus_share_real']:11.1f}%")
    if len(rounds) > 1:
        print(f"\nmedian over {len(rounds)} rounds")
        for backend, xs in ratio.items():
            print(f"{backend:<8} × local (cells) {statistics.median(xs):.2f}  "
                  f"apparatus share {statistics.median(share[backend]):.1f}% "
                  f"(real CLIs' cells {statistics.median(real[backend]):.1f}%)")
        best = {backend: fastest(times) for backend, times in per_cell.items()}
        local_best = sum(best.get("local", {}).values())
        print(f"\nbest of {len(rounds)} rounds (each cell's fastest time, summed)")
        for backend, cells in best.items():
            total = sum(cells.values())
            x = total / local_best if local_best else float("nan")
            print(f"{backend:<8} {len(cells)} cells {total:6.1f} s  × local {x:.2f}")
        _best_per_cell(best)


def _best_per_cell(best: dict[str, dict[str, float]]) -> None:
    """Each cell's fastest time per backend (:func:`fastest`), and how much longer than its local one."""
    backends = list(best)
    keys = sorted(set().union(*(set(v) for v in best.values())))
    print(f"\n{'cell (fastest s)':<44} " + " ".join(f"{b:>8}" for b in backends)
          + ("  " + " ".join(f"{'+' + b:>9}" for b in backends if b != "local") if "local" in best else ""))
    for key in keys:
        line = f"{key:<44} " + " ".join(f"{best[b].get(key, float('nan')):8.2f}" for b in backends)
        if "local" in best and key in best["local"]:
            line += "  " + " ".join(f"{best[b].get(key, float('nan')) - best['local'][key]:+9.2f}"
                                    for b in backends if b != "local")
        print(line)


if __name__ == "__main__":
    raise SystemExit(main())
