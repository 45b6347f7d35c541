"""The version diff: for each harness run at two or more versions in one output
(``claude_code`` — the pin — next to ``claude_code@2.1.332``, or several named versions),
the criteria whose verdict flips between versions, per task and model.

Pure: it reads only :class:`~reports.records.RunRecord` fields. A harness name is
``<harness>[@<version>]``; the plain name is the pinned install and sorts first, named
versions follow in version order. A criterion present in one version's verdicts and not
another's is ``absent`` there; a cell measured in one version and not another (unsupported,
apparatus-invalid, not scored …) gives a ``status`` row instead of criterion rows, since
its verdicts are not comparable.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from reports.records import RunRecord
from reports.schema import VersionDiff, VersionFlip

__all__ = ["ABSENT", "base_harness", "version_diff", "version_key"]

#: The state of a criterion missing from one version's verdicts.
ABSENT = "absent"


def base_harness(name: str) -> str:
    """``claude_code@2.1.332`` -> ``claude_code`` (a variant ``reference+x`` is its own harness)."""
    return name.partition("@")[0]


def version_key(name: str) -> tuple[int, tuple[tuple[int, str], ...]]:
    """Sort key of a harness name: the plain (pinned) name first, then named versions by
    their numeric parts (``2.1.99`` < ``2.1.332``; ``0.2.1rc2`` by ``0, 2, 1, rc, 2``)."""
    _, at, version = name.partition("@")
    if not at:
        return (0, ())
    parts = tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.findall(r"\d+|[A-Za-z]+", version))
    return (1, parts)


def version_diff(runs: Sequence[RunRecord]) -> list[VersionDiff]:
    """One :class:`VersionDiff` per harness run under two or more names (versions)."""
    by_harness: dict[str, list[RunRecord]] = defaultdict(list)
    for r in runs:
        by_harness[base_harness(r.harness)].append(r)
    out: list[VersionDiff] = []
    for harness in sorted(by_harness):
        records = by_harness[harness]
        names = sorted({r.harness for r in records}, key=version_key)
        if len(names) < 2:
            continue
        versions: dict[str, str | None] = {}
        for name in names:
            found = sorted({r.harness_version for r in records if r.harness == name and r.harness_version})
            versions[name] = ", ".join(found) if found else None
        cells: dict[tuple[str, str], dict[str, RunRecord]] = defaultdict(dict)
        for r in records:
            cells[(r.task_id, r.model)][r.harness] = r
        flips: list[VersionFlip] = []
        compared = 0
        for (task, model), ran in sorted(cells.items()):
            if len(ran) < 2:
                continue
            compared += 1
            order = sorted(ran, key=version_key)
            statuses = {n: ran[n].status for n in order}
            if any(s != "measured" for s in statuses.values()):
                if len(set(statuses.values())) > 1:
                    flips.append(VersionFlip(task_id=task, model=model, criterion="status", layer=None,
                                             states=statuses))
                continue
            states = {n: {cid: (layer, state) for cid, layer, state in ran[n].verdicts} for n in order}
            ids = list(dict.fromkeys(cid for n in order for cid, _, _ in ran[n].verdicts))
            for cid in ids:
                row = {n: states[n][cid][1] if cid in states[n] else ABSENT for n in order}
                if len(set(row.values())) > 1:
                    layer = next(states[n][cid][0] for n in order if cid in states[n])
                    flips.append(VersionFlip(task_id=task, model=model, criterion=cid, layer=layer, states=row))
        out.append(VersionDiff(harness=harness, versions=versions, cells_compared=compared, flips=flips))
    return out
