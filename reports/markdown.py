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


def render_markdown(summary: CorpusSummary) -> str:
    """The whole ``summary.md``."""
    parts = [f"# TraceTrial report — protocol: {summary.protocol_label}", ""]
    parts += [table_md(t) for t in all_tables(summary)]
    parts.append("The task × harness heatmap and per-cell links to the archive are in `report.html`; "
                 "every figure is in `summary.json`.")
    if summary.problems:
        parts += ["", f"## Consistency warnings ({len(summary.problems)})", ""]
        parts += [f"- {_cell(p)}" for p in summary.problems]
    return "\n".join(parts) + "\n"
