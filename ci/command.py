"""``tracetrial gate``: read the baseline and the archive, compare, print, (optionally) update.

This is the only I/O layer of the gate; :mod:`ci.gate` stays pure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from ci.baseline import (
    Baseline,
    BaselineError,
    OutputSnapshot,
    load,
    merge,
    merge_cells,
    read_output,
    store,
)
from ci.gate import (
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_USAGE,
    GateResult,
    compare,
    format_result,
    repetition_disagreements,
)
from tracetrial.archive import repetition_roots

__all__ = ["gate"]


def gate(baseline_path: Path, output: Path, *, update: bool = False, allow_version_change: bool = False,
         cells_only: bool = False, echo: Callable[[str], None] = print) -> int:
    """Run the gate and return the process exit code (see :mod:`ci.gate` for the codes).

    Args:
        baseline_path: the ``tt-baseline/1`` file.
        output: a session's archive folder (``--tt-output``).
        update: after printing the diff, rewrite the baseline from the output: the cells and
            versions of every harness in the output replace the stored ones (other harnesses'
            cells are kept). Always exits 0 unless the inputs are unusable.
        allow_version_change: compare even when a harness version differs (the diff is labelled).
        cells_only: with ``update``, replace only the output's own cells (e.g. new task packs) and
            keep every other cell of the same harnesses; refused when a harness in the output ran
            at another version than the stored one.
        echo: where lines go (``print``; tests pass a list's ``append``).
    """
    output = Path(output)
    if not (output / "traces").is_dir():
        print(f"error: {output} has no traces/ folder (not a TraceTrial output)", file=sys.stderr)
        return EXIT_USAGE
    roots = repetition_roots(output)
    if len(roots) > 1:
        snapshots = [(rep, read_output(root)) for rep, root in roots]
        if not update:
            return _gate_repetitions(baseline_path, output, snapshots, allow_version_change, echo)
        disagree = repetition_disagreements(snapshots)
        if disagree:
            # One state per criterion is all a baseline holds: recording one repetition of a cell
            # that flips would make the next run's gate a coin toss.
            for line in disagree:
                print(f"error: {line}", file=sys.stderr)
            print(f"error: refusing to record a baseline from {output}: its {len(roots)} repetitions disagree on "
                  f"{len(disagree)} cell(s) (listed above); find why they are not repeatable, or record one "
                  "repetition's folder", file=sys.stderr)
            return EXIT_USAGE
        tampered = sorted({f"{key} (repetition {rep})": why for rep, snap in snapshots[1:]
                           for key, why in snap.tampered.items()}.items())
        if tampered:
            for key, why in tampered:
                print(f"error: {key}: tampered: {why}", file=sys.stderr)
            print(f"error: refusing to record a baseline from {output}: {len(tampered)} tampered cell(s); "
                  "re-run them with --tt-rerun", file=sys.stderr)
            return EXIT_USAGE
        echo(f"the {len(roots)} repetitions agree on every cell; recording repetition 1")
    # repetition 1 is the output itself: already read when there are several
    snapshot = snapshots[0][1] if len(roots) > 1 else read_output(output)
    if not snapshot.versions and not snapshot.unmeasured:
        print(f"error: no cells under {output / 'traces'}", file=sys.stderr)
        return EXIT_USAGE
    stored: Baseline | None
    try:
        stored = load(baseline_path)
    except BaselineError as exc:
        if not (update and not Path(baseline_path).exists()):
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        stored = None
    if update and snapshot.tampered:
        # Recording a forged cell would launder it into the reference every later run is held to.
        for key, why in sorted(snapshot.tampered.items()):
            print(f"error: {key}: tampered: {why}", file=sys.stderr)
        print(f"error: refusing to record a baseline from {output}: {len(snapshot.tampered)} tampered cell(s); "
              "re-run them with --tt-rerun", file=sys.stderr)
        return EXIT_USAGE
    if update:
        current = snapshot.baseline
        if stored is not None:
            if stored.protocol != current.protocol:
                print(f"error: the output ran under protocol {current.protocol} but {baseline_path} records "
                      f"{stored.protocol}; use another baseline file", file=sys.stderr)
                return EXIT_USAGE
            result = compare(stored, snapshot, allow_version_change=True)
            for line in format_result(result, baseline_name=str(baseline_path), output_name=str(output),
                                      harness_versions=current.harness_versions):
                echo(line)
        for problem in snapshot.problems:
            echo(f"warning: {problem}")
        if cells_only and stored is not None:
            moved = {h: (stored.harness_versions[h], v) for h, v in current.harness_versions.items()
                     if h in stored.harness_versions and stored.harness_versions[h] != v}
            if moved:
                for h, (was, now) in sorted(moved.items()):
                    print(f"error: {h} ran at {now or 'unknown'} but {baseline_path} records {was or 'unknown'}",
                          file=sys.stderr)
                print("error: --cells-only keeps the other cells of these harnesses, which were measured at "
                      "the recorded version; re-record the whole harness with --update instead", file=sys.stderr)
                return EXIT_USAGE
            new = merge_cells(stored, current)
        else:
            new = merge(stored, current, snapshot.harnesses)
        store(new, baseline_path)
        kept = len(new.cells) - len(current.cells)
        versions = ", ".join(f"{h} {v or 'unknown'}" for h, v in sorted(current.harness_versions.items()))
        echo(f"updated {baseline_path}: {len(current.cells)} cell(s) from {output} ({versions})"
             + (f"; {kept} other cell(s) kept" if kept and cells_only else
               f"; {kept} cell(s) of other harnesses kept" if kept else ""))
        return EXIT_OK
    assert stored is not None
    result = compare(stored, snapshot, allow_version_change=allow_version_change)
    for line in format_result(result, baseline_name=str(baseline_path), output_name=str(output),
                              harness_versions=snapshot.baseline.harness_versions):
        echo(line)
    return result.exit_code


def _gate_repetitions(baseline_path: Path, output: Path, snapshots: list[tuple[int, OutputSnapshot]],
                      allow_version_change: bool, echo: Callable[[str], None]) -> int:
    """Compare every repetition with the baseline on its own; the worst outcome is the exit code
    (a refusal, else a regression in any repetition, else a pass)."""
    try:
        stored = load(baseline_path)
    except BaselineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    results: list[tuple[int, GateResult]] = []
    for rep, snapshot in snapshots:
        result = compare(stored, snapshot, allow_version_change=allow_version_change)
        for line in format_result(result, baseline_name=str(baseline_path),
                                  output_name=f"{output} (repetition {rep} of {len(snapshots)})",
                                  harness_versions=snapshot.baseline.harness_versions):
            echo(line)
        results.append((rep, result))
    refused = [(rep, r) for rep, r in results if r.refused]
    failed = [rep for rep, r in results if not r.refused and r.failed]
    for line in repetition_disagreements(snapshots):
        echo(f"note: repetitions disagree: {line}")
    if refused:
        code = refused[0][1].exit_code
        echo(f"gate over {len(snapshots)} repetitions: REFUSED in repetition(s) "
             f"{', '.join(str(rep) for rep, _ in refused)} (exit {code})")
        return code
    code = EXIT_REGRESSION if failed else EXIT_OK
    echo(f"gate over {len(snapshots)} repetitions: "
         + (f"FAIL in repetition(s) {', '.join(map(str, failed))}" if failed else "PASS in every repetition")
         + f" (exit {code})")
    return code
