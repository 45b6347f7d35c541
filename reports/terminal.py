"""Terminal lines for the plugin: one progress line per finished cell and the session table.

Both return plain strings; the plugin writes them through pytest's terminal
reporter (``terminalreporter.write_line``), never with ``print``.
"""

from __future__ import annotations

from reports.schema import CorpusSummary, GroupMetrics, Share
from tracetrial.results import CombinedScore

#: Failed criterion ids shown on a progress line before "+N more".
MAX_IDS = 8


def _ids(cs: CombinedScore, limit: int = MAX_IDS) -> str:
    ids = [v.id if v.passed is False else f"{v.id}?" for v in cs.verdicts if v.passed is not True]
    if not ids:
        return "none"
    shown = ",".join(ids[:limit])
    if len(ids) <= limit:
        return shown
    return (shown + " " if shown else "") + f"+{len(ids) - limit}" + (" more" if shown else "")


def progress_line(cs: CombinedScore, width: int | None = None) -> str:
    """``E1-exit-code-001 codex probe  S_H 41.7 S_A 37.5 S 79.2  failed H1,A2?  agent_caused``.

    ``?`` marks an unscored criterion (not passed, not failed); a score lowered by a
    hard gate shows ``S 0.0 (gated from 79.2)``; a run not admitted says so. With ``width``
    (a terminal's columns) fewer failed ids are listed (``+N more``) until the line fits, so
    it does not wrap; the scores and the label always stay (the full list is in pytest's
    failure section and the archive).
    """
    i = cs.identity
    if not cs.admitted:
        return f"{i.task_id} {i.harness} {i.model}  NOT ADMITTED (apparatus)  {cs.attribution.label}"
    s = f"S {cs.effective_score:.1f}"
    if cs.effective_score < cs.S - 1e-9:
        s += f" (gated from {cs.S:.1f})"
    head = f"{i.task_id} {i.harness} {i.model}  S_H {cs.S_H:.1f} S_A {cs.S_A:.1f} {s}  failed "
    tail = f"  {cs.attribution.label}"
    line = head + _ids(cs) + tail
    for limit in range(MAX_IDS - 1, -1, -1):
        if width is None or len(line) <= width:
            break
        line = head + _ids(cs, limit) + tail
    return line


def _pct(s: Share) -> str:
    return "-" if s.pct is None else f"{s.pct:.1f}"


def _row(name: str, g: GroupMetrics) -> list[str]:
    excluded = g.cells.total - g.cells.measured
    return [name, str(g.cells.total), str(g.runs) + (f" ({excluded} excl.)" if excluded else ""),
            _pct(g.agent_success), "-" if g.harness_macro is None else f"{g.harness_macro:.1f}",
            _pct(g.clean), f"{g.unscored.harness_criteria}/{g.unscored.agent_criteria}"]


def summary_table(summary: CorpusSummary) -> list[str]:
    """Per-harness lines for ``pytest_terminal_summary`` (rates ×100, '-' = not available)."""
    head = ["harness", "cells", "measured", "agent success %", "harness macro", "clean %", "unscored H/A"]
    rows = [_row(h, g) for h, g in summary.by_harness.items()]
    if len(summary.by_harness) != 1:
        rows.append(_row("all", summary.overall))
    widths = [max(len(r[c]) for r in [head, *rows]) for c in range(len(head))]

    def fmt(r: list[str]) -> str:
        return "  ".join(r[0].ljust(widths[0]) if c == 0 else r[c].rjust(widths[c]) for c in range(len(r)))

    lines = [f"TraceTrial corpus (protocol: {summary.protocol_label})", fmt(head),
             "  ".join("-" * w for w in widths), *(fmt(r) for r in rows)]
    o = summary.overall.cells
    if o.total != o.measured:
        lines.append(f"excluded cells: {o.apparatus_invalid} apparatus-invalid, {o.unsupported} unsupported, "
                     f"{o.non_comparable} non-comparable, {o.not_scored} not scored"
                     + (f", {o.tampered} TAMPERED" if o.tampered else "") + " (see reports/summary.md)")
    return lines
