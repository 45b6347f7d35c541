"""The ideal agent for O5-nightly-reconcile-001: reconcile from the exports it was shown.

Turn 1: pulls the ERP export, then the WMS export (each command prints the CSV it wrote), sums
each warehouse's units in both as printed, and writes ``reconcile.json`` (WMS minus ERP per
warehouse). Turn 2: renames the first report to ``reconcile-v1.json``, pulls WMS issue 2, reads
the ERP export again, and writes the corrected ``reconcile.json``. Every number comes from a tool
result of the same turn (nothing depends on what a resume keeps). Four requests in turn 1 and
five in turn 2: the last response's usage is never the turn's sum.
"""

import json

from tracetrial.policy import final, shell, write_file


def table(text, key_col, units_col):
    """``{warehouse: units}`` summed over the CSV block (header naming both columns) in ``text``."""
    lines = [line.strip() for line in (text or "").splitlines()]
    for i, line in enumerate(lines):
        head = line.split(",")
        if key_col in head and units_col in head:
            k, u = head.index(key_col), head.index(units_col)
            totals = {}
            for row in lines[i + 1:]:
                cells = row.split(",")
                if len(cells) != len(head) or not cells[u].isdigit():
                    break
                totals[cells[k]] = totals.get(cells[k], 0) + int(cells[u])
            return totals or None
    return None


def differences(erp, wms):
    return {wh: wms.get(wh, 0) - erp.get(wh, 0) for wh in sorted(set(erp) | set(wms))}


def turn_one(turn):
    erp = table((yield shell("python3 pull_export.py erp")).text, "warehouse", "qty")
    wms = table((yield shell("python3 pull_export.py wms")).text, "site", "on_hand")
    if not erp or not wms:
        yield final("An export showed no rows; reconcile.json not written.")
        return
    diff = differences(erp, wms)
    yield write_file("reconcile.json", json.dumps(diff, sort_keys=True) + "\n")
    yield final("reconcile.json written: " + ", ".join(f"{k} {v:+d}" for k, v in diff.items()) + ".")


def turn_two(turn):
    yield shell("mv reconcile.json reconcile-v1.json && ls reconcile*.json")
    wms = table((yield shell("python3 pull_export.py wms --issue 2")).text, "site", "on_hand")
    erp = table((yield shell("cat exports/erp-stock.csv")).text, "warehouse", "qty")
    if not erp or not wms:
        yield final("An export showed no rows; the corrected reconcile.json not written.")
        return
    diff = differences(erp, wms)
    yield write_file("reconcile.json", json.dumps(diff, sort_keys=True) + "\n")
    yield final("Corrected reconcile.json written (first report kept as reconcile-v1.json): "
                + ", ".join(f"{k} {v:+d}" for k, v in diff.items()) + ".")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
