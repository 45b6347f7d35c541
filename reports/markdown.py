"""``reports/summary.md``: the summary tables as GitHub-flavoured Markdown."""

from __future__ import annotations

from reports.schema import CorpusSummary
from reports.tables import Table, all_tables


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_md(t: Table) -> str:
    """One table with its heading and caption."""
    lines = [f"## {t.title}", ""]
    if t.caption:
        lines += [t.caption, ""]
    if not t.rows:
        return "\n".join([*lines, "_none_", ""])
    aligns = ["---:" if i in t.numeric else ":---" for i in range(len(t.headers))]
    lines.append("| " + " | ".join(_cell(h) or " " for h in t.headers) + " |")
    lines.append("| " + " | ".join(aligns) + " |")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return "\n".join([*lines, ""])


def _link(text: str, href: str) -> str:
    return f"[{_cell(text).replace('[', '(').replace(']', ')')}](<{href}>)"


def drilldown_md(summary: CorpusSummary) -> str:
    """The cells with a criterion not passed, each linked to its criteria page (``cells/…``)."""
    rows = [c for c in summary.cells if c.page]
    lines = [f"## Cells with a criterion not passed ({len(rows)})", "",
             "Core criteria not passed (? = unscored), then the diagnostic ones (in no score); each cell "
             "links to its criteria page (statement, verdict, reason, evidence, cited Trace IR events).", ""]
    if not rows:
        return "\n".join([*lines, "_none_", ""])
    lines += ["| Task | Model | Harness | Rep. | S | Not passed | Diagnostic | Page |",
              "| :--- | :--- | :--- | ---: | ---: | :--- | :--- | :--- |"]
    for c in rows:
        core = ", ".join(i + ("?" if i in c.unscored else "") for i in c.failed)
        diag = ", ".join([*c.diagnostic_failed, *(i + "?" for i in c.diagnostic_unscored)])
        score = c.status if c.status != "measured" else ("—" if c.effective_score is None
                                                          else f"{c.effective_score:.1f}")
        assert c.page is not None
        lines.append(f"| {_cell(c.task_id)} | {_cell(c.model)} | {_cell(c.harness)} | {c.repetition} | {score} | "
                     f"{_cell(core)} | {_cell(diag)} | {_link('criteria', c.page)} |")
    return "\n".join([*lines, ""])


def render_markdown(summary: CorpusSummary) -> str:
    """The whole ``summary.md``."""
    parts = [f"# TraceTrial report — protocol: {summary.protocol_label}", ""]
    parts += [table_md(t) for t in all_tables(summary)]
    parts.append(drilldown_md(summary))
    parts.append("The task × harness heatmap and per-cell links to the archive are in `report.html`; "
                 "every figure is in `summary.json`.")
    if summary.problems:
        parts += ["", f"## Consistency warnings ({len(summary.problems)})", ""]
        parts += [f"- {_cell(p)}" for p in summary.problems]
    return "\n".join(parts) + "\n"
