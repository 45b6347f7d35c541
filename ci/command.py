"""``tracetrial gate``: read the baseline and the archive, compare, print, (optionally) update.

This is the only I/O layer of the gate; :mod:`ci.gate` stays pure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from ci.baseline import Baseline, BaselineError, load, merge, merge_cells, read_output, store
from ci.gate import EXIT_OK, EXIT_USAGE, compare, format_result

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
    snapshot = read_output(output)
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
