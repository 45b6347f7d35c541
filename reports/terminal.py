"""Terminal lines for the plugin: one progress line per finished cell and the session table.

Both return plain strings; the plugin writes them through pytest's terminal
reporter (``terminalreporter.write_line``), never with ``print``.
"""

from __future__ import annotations

import textwrap

from reports.schema import CellCounts, CorpusSummary, GroupMetrics, RepeatMetrics, Share
from tracetrial.results import CombinedScore

#: Failed criterion ids shown on a progress line before "+N more".
MAX_IDS = 8
#: Columns the session table's prose lines wrap at.
WIDTH = 80


def _ids(cs: CombinedScore, limit: int = MAX_IDS) -> str:
    ids = [v.id if v.passed is False else f"{v.id}?" for v in cs.verdicts if v.passed is not True]
    if not ids:
        return "none"
    shown = ",".join(ids[:limit])
    if len(ids) <= limit:
        return shown
    return (shown + " " if shown else "") + f"+{len(ids) - limit}" + (" more" if shown else "")


def fit_cell_line(task: str, harness: str, model: str, tails: list[str], width: int | None) -> str:
    """``<task> <harness> <model><tail>`` with the first of ``tails`` (richest first) that fits ``width``
    columns; with the last tail, the harness name is shortened with ``…`` (the task, model and tail
    stay), and as a last resort the line is cut. Without ``width``, the first tail."""
    ident = f"{task} {harness} {model}"
    if width is None:
        return ident + tails[0]
    for tail in tails:
        if len(ident) + len(tail) <= width:
            return ident + tail
    tail = tails[-1]
    room = width - len(tail) - len(task) - len(model) - 2
    if room >= 6:
        return f"{task} {harness[:room - 1]}… {model}{tail}"
    line = ident + tail
    return line if len(line) <= width else line[:max(width - 1, 0)] + "…"


def progress_line(cs: CombinedScore, width: int | None = None, repetition: int = 1, *,
                  cost: float | None = None) -> str:
    """``E1-exit-code-001 codex probe  S_H 41.7 S_A 37.5 S 79.2  failed H1,A2?  agent_caused``.

    ``?`` marks an unscored criterion (not passed, not failed); a score lowered by a
    hard gate shows ``S 0.0 (gated from 79.2)``; a run not admitted says so; a repetition
    after the first (``--tt-repeat``) is named after the model (``probe rep 2``), and so is a live
    cell's cost by the frozen catalogue (``claude-sonnet-4-6 $0.0412``). With ``width``
    (a terminal's columns) the line never wraps: fewer failed ids are listed (``+N more``), then
    S_H and S_A go, then the label, then the harness name is shortened (the full list is in
    pytest's failure section and the archive; the score and the failed count always stay).
    """
    i = cs.identity
    model = i.model + (f" rep {repetition}" if repetition > 1 else "") + (f" ${cost:.4f}" if cost is not None else "")
    if not cs.admitted:
        return fit_cell_line(i.task_id, i.harness, model, [f"  NOT ADMITTED (apparatus)  {cs.attribution.label}",
                                                           "  NOT ADMITTED (apparatus)"], width)
    s = f"S {cs.effective_score:.1f}"
    if cs.effective_score < cs.S - 1e-9:
        s += f" (gated from {cs.S:.1f})"
    label = f"  {cs.attribution.label}"
    full = f"  S_H {cs.S_H:.1f} S_A {cs.S_A:.1f} {s}  failed "
    tails = [full + _ids(cs, limit) + label for limit in range(MAX_IDS, -1, -1)]
    tails += [f"  {s}  failed {_ids(cs, 0)}{label}", f"  {s}  failed {_ids(cs, 0)}"]
    return fit_cell_line(i.task_id, i.harness, model, tails, width)


def _pct(s: Share) -> str:
    return "-" if s.pct is None else f"{s.pct:.1f}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _row(name: str, g: GroupMetrics) -> list[str]:
    return [name, f"{g.runs}/{g.cells.total}", _pct(g.agent_success), _num(g.harness_macro), _pct(g.clean),
            f"{g.unscored.harness_criteria}/{g.unscored.agent_criteria}"]


def _fmt(rows: list[list[str]]) -> list[str]:
    """Left-aligned first column, right-aligned others, two spaces apart."""
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  ".join(r[0].ljust(widths[0]) if c == 0 else r[c].rjust(widths[c]) for c in range(len(r))).rstrip()
            for r in rows]


def _rule(rows: list[list[str]]) -> list[str]:
    return ["-" * max(len(r[c]) for r in rows) for c in range(len(rows[0]))]


def _variant(name: str) -> str:
    """``reference+hide_exit_code`` -> ``  +hide_exit_code`` under ``reference`` (keeps the table narrow)."""
    base, plus, variant = name.partition("+")
    return f"  +{variant}" if plus and base.split("@", 1)[0] == "reference" else name


def _repeat_lines(summary: CorpusSummary) -> list[str]:
    r = summary.repeats
    if r is None:
        return []
    k = r.k
    head = ["harness", "cells", "pass^1", f"pass^{k}", f"pass@{k}", f"{r.agreement_label} %"]

    def row(name: str, m: RepeatMetrics) -> list[str]:
        a = m.agreement
        return [name, str(m.combined.cells), _num(m.combined.pass_hat[0] if m.combined.pass_hat else None),
                _num(m.combined.pass_hat[k - 1] if len(m.combined.pass_hat) >= k else None),
                _num(m.combined.pass_at[k - 1] if len(m.combined.pass_at) >= k else None),
                "-" if a.pct is None else f"{a.pct:.1f} ({a.identical}/{a.cells})"]

    rows = [row(_variant(h), m) for h, m in r.by_harness.items()]
    if len(r.by_harness) != 1:
        rows.append(row("all", r.overall))
    table = [head, _rule([head, *rows]), *rows]
    return [f"repeated runs (up to {k} per cell; a run passes at S = 100):", *_fmt(table)]


def _all_cells(summary: CorpusSummary) -> CellCounts:
    """Every cell of the output by status: the corpus pool plus the calibration instrument when it
    is kept apart (an excluded calibration cell, e.g. a TAMPERED one, must still be announced)."""
    o = summary.overall.cells
    cal = summary.calibration
    if cal is None or cal.included_in_pools:
        return o
    c = cal.overall.cells
    return CellCounts(**{f: getattr(o, f) + getattr(c, f) for f in CellCounts.model_fields})


def summary_table(summary: CorpusSummary) -> list[str]:
    """Lines for ``pytest_terminal_summary`` (rates ×100, '-' = not available), at most 80 columns
    for usual harness names: the evaluated harnesses and their pool ('all'), the calibration
    instrument apart (not in 'all' unless the summary pooled it), the versions that ran when a
    ``name@version`` harness is present, and pass^k / agreement when cells were repeated."""
    head = ["harness", "measured", "success %", "H macro", "clean %", "unscored H/A"]
    rows = [_row(h, g) for h, g in summary.by_harness.items()]
    if len(summary.by_harness) > 1:
        rows.append(_row("all", summary.overall))
    cal = summary.calibration
    cal_rows: list[list[str]] = []
    if cal is not None and not cal.included_in_pools:
        cal_rows = [_row(_variant(h), g) for h, g in cal.by_harness.items()]
    table = _fmt([head, _rule([head, *rows, *cal_rows]), *rows, *cal_rows])
    lines = [f"TraceTrial corpus (protocol: {summary.protocol_label})", *table[:2 + len(rows)]]
    if cal_rows:
        lines.append("calibration instrument (reference and mutants, not in 'all'):")
        lines += table[2 + len(rows):]
    notes = ["measured = measured/cells; success = agent task success; H macro = mean p_H/n_H"]
    o = _all_cells(summary)
    if o.total != o.measured:
        notes.append(f"excluded cells: {o.apparatus_invalid} apparatus-invalid, {o.unsupported} unsupported, "
                     f"{o.non_comparable} non-comparable, {o.not_scored} not scored"
                     + (f", {o.tampered} TAMPERED" if o.tampered else "") + " (see reports/summary.md)")
    named = {h.partition("@")[0] for h in summary.harness_versions if "@" in h}
    if named:
        shown = [f"{h} {', '.join(v) or '?'}" for h, v in summary.harness_versions.items()
                 if h.partition("@")[0] in named]
        notes.append("versions: " + "; ".join(shown))
    # Prose lines wrap at 80 columns (a wrapped line would break the terminal's layout).
    lines += [part for note in notes for part in textwrap.wrap(note, WIDTH, subsequent_indent="  ")]
    lines += _repeat_lines(summary)
    return lines
