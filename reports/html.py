"""``reports/report.html``: one static page, inline CSS, no script, no external asset.

The heatmap PNG is embedded as base64 (it is also written next to the page).
Cell rows link to the archive folders relative to the page:
``../traces/<task>/<model>/<harness>/`` and its ``combined_score.json`` / ``events.json``.
"""

from __future__ import annotations

import base64
from html import escape
from urllib.parse import quote

from reports.schema import CellRow, CorpusSummary
from reports.tables import NA, Table, all_tables, component_label, f1, has_named_versions

#: The report's stylesheet (inline; the drill-down pages use it too).
REPORT_CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#d8dde6; --head:#eef1f6; --zebra:#f8f9fb; --accent:#2952a3; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
       color:var(--fg); background:#fff; }
main { max-width:1280px; margin:0 auto; padding:20px 28px 60px; }
h1 { font-size:22px; margin:0 0 4px; }
h2 { font-size:17px; margin:30px 0 6px; padding-bottom:4px; border-bottom:2px solid var(--line); }
h3 { font-size:15px; margin:0; display:inline; }
p.caption { color:var(--muted); margin:2px 0 8px; font-size:13px; max-width:1000px; }
.badge { display:inline-block; padding:2px 10px; border-radius:12px; font-weight:600; font-size:13px;
         background:#e3ecff; color:#1c3f8f; border:1px solid #b8cbf5; }
.badge.live { background:#fff1dc; color:#8a4b00; border-color:#f0cf9c; }
.badge.mixed { background:#ffe3e3; color:#8f1c1c; border-color:#f0a9a9; }
nav { margin:10px 0 0; font-size:13px; display:flex; flex-wrap:wrap; gap:4px 14px; }
nav a { color:var(--accent); text-decoration:none; white-space:nowrap; }
.scroll { overflow-x:auto; max-width:100%; }
table { border-collapse:collapse; margin:4px 0 4px; font-size:13px; }
th, td { border:1px solid var(--line); padding:4px 8px; text-align:left; vertical-align:top;
         white-space:nowrap; }
td.wrap { white-space:normal; min-width:260px; }
th { background:var(--head); font-weight:600; position:sticky; top:0; z-index:1; }
tbody tr:nth-child(even) td { background:var(--zebra); }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
tr.total td { font-weight:600; border-top:2px solid #9aa3b5; }
table.kv td:first-child { font-weight:600; background:var(--head); white-space:nowrap; }
td.heat { color:#111; }
td.ids, td.reason { white-space:normal; min-width:200px; max-width:420px; word-break:break-word; }
td.ids { font-family:ui-monospace,"DejaVu Sans Mono",monospace; font-size:12px; }
td.links a { color:var(--accent); margin-right:6px; }
.status-apparatus_invalid, .status-not_scored { color:#a01818; font-weight:600; }
.status-tampered { color:#fff; background:#a01818; font-weight:700; padding:0 4px; border-radius:3px; }
.status-unsupported, .status-non_comparable { color:#8a5a00; font-weight:600; }
details { margin:6px 0; border:1px solid var(--line); border-radius:6px; padding:6px 10px; }
details[open] { padding-bottom:10px; }
summary { cursor:pointer; }
img.heatmap { max-width:100%; height:auto; border:1px solid var(--line); }
ul.problems { color:#8f1c1c; font-size:13px; }
.diag { color:#6b4a00; font-style:italic; }
td.links a.page { font-weight:600; }
td.grid { white-space:nowrap; }
td.grid a { display:inline-block; min-width:42px; margin:1px 2px; padding:0 4px; border-radius:3px; color:#111;
            text-decoration:none; text-align:right; font-variant-numeric:tabular-nums; }
td.grid a:hover { outline:1px solid var(--accent); }
"""


def _heat_style(v: float) -> str:
    hue = max(0.0, min(100.0, v)) * 1.2
    return f' style="background:hsl({hue:.0f},65%,82%)"'


def table_html(t: Table) -> str:
    """One table with heading and caption (the headline is a key/value table)."""
    out = [f'<h2 id="{t.key}">{escape(t.title)}</h2>']
    if t.caption:
        out.append(f'<p class="caption">{escape(t.caption)}</p>')
    if not t.rows:
        out.append('<p class="caption">none</p>')
        return "\n".join(out)
    cls = ' class="kv"' if t.key == "headline" else ""
    out.append(f'<div class="scroll"><table{cls}>')
    if t.key != "headline":
        heads = "".join(f'<th{" class=num" if i in t.numeric else ""}>{escape(h)}</th>'
                        for i, h in enumerate(t.headers))
        out.append(f"<thead><tr>{heads}</tr></thead>")
    out.append("<tbody>")
    for r, row in enumerate(t.rows):
        total = ' class="total"' if t.key != "headline" and row and row[0] in ("All", "All calibration") else ""
        cells = []
        for c, text in enumerate(row):
            classes = []
            if c in t.numeric:
                classes.append("num")
            if c in t.wrap:
                classes.append("wrap")
            style = ""
            if (r, c) in t.heat:
                classes.append("heat")
                style = _heat_style(t.heat[(r, c)])
            if t.key == "excluded" and c == 3:
                classes.append(f"status-{text}")
            attr = f' class="{" ".join(classes)}"' if classes else ""
            cells.append(f"<td{attr}{style}>{escape(text)}</td>")
        out.append(f"<tr{total}>{''.join(cells)}</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _href(path: str, leaf: str = "") -> str:
    return escape(quote(f"../{path}/{leaf}", safe="/+-_.=~@"))


def _page_href(c: CellRow) -> str:
    """The cell's drill-down page (relative to report.html), else its archive folder."""
    return escape(quote(c.page, safe="/+-_.=~@")) if c.page else _href(c.path)


def _ids(c: CellRow) -> str:
    """Core ids not passed, then the diagnostic ones marked as such (``?``: unscored)."""
    core = [escape(i + ("?" if i in c.unscored else "")) for i in c.failed]
    diag = [escape(i) for i in c.diagnostic_failed] + [escape(i + "?") for i in c.diagnostic_unscored]
    out = ", ".join(core)
    if diag:
        out += (" " if out else "") + f'<span class="diag">diagnostic: {", ".join(diag)}</span>'
    return out


def _cell_row(c: CellRow, versions: bool, repeats: bool) -> str:
    links = f'<a href="{_href(c.path)}">folder</a>'
    if c.status in ("measured", "apparatus_invalid"):
        links += f'<a href="{_href(c.path, "artifacts/llm_judge/combined_score.json")}">combined_score.json</a>'
    links += f'<a href="{_href(c.path, "events.json")}">events.json</a>'
    if c.page:
        links = f'<a class="page" href="{_page_href(c)}">criteria page</a>' + links
    lead = (f"<tr><td>{escape(c.task_id)}</td><td title=\"{escape(component_label(c.component))}\">"
            f"{escape(c.component)}</td><td>{escape(c.model)}</td>")
    if versions:
        lead += f"<td>{escape(c.harness_version or NA)}</td>"
    if repeats:
        lead += f'<td class="num">{c.repetition}</td>'
    if c.status != "measured":
        detail = f'<span class="status-{c.status}">{escape(c.status)}</span>: {escape(c.reason or "")}'
        return (f'{lead}<td class="num">{NA}</td><td class="num">{NA}</td><td class="num">{NA}</td>'
                f'<td colspan="2" class="reason">{detail}</td><td class="links">{links}</td></tr>')
    heat = _heat_style(c.effective_score) if c.effective_score is not None else ""
    gated = " (gated)" if c.S is not None and c.effective_score is not None and c.effective_score < c.S else ""
    return (f'{lead}<td class="num">{f1(c.S_H)}</td><td class="num">{f1(c.S_A)}</td>'
            f'<td class="num heat"{heat}>{f1(c.effective_score)}{gated}</td>'
            f"<td>{escape(c.label or '')}</td><td class=\"ids\">{_ids(c)}</td>"
            f'<td class="links">{links}</td></tr>')


#: Up to this many cells, the per-harness blocks start open.
OPEN_CELLS_UP_TO = 200


def _cell_order(c: CellRow) -> tuple[int, str, str, int]:
    return ("CEGLOTV?".find(c.component), c.task_id, c.model, c.repetition)


def _harness_order(summary: CorpusSummary) -> list[str]:
    """Evaluated harnesses first, then the calibration instrument (reference, then its mutants)."""
    cal = {c.harness for c in summary.cells if c.calibration}
    names = sorted({c.harness for c in summary.cells})
    return ([h for h in names if h not in cal]
            + sorted((h for h in names if h in cal), key=lambda h: (h.partition("+")[2] != "", h)))


def cells_html(summary: CorpusSummary) -> str:
    """Per-cell tables, one collapsible block per harness (open for small corpora); evaluated
    harnesses first, then the calibration instrument."""
    by_harness: dict[str, list[CellRow]] = {}
    for c in summary.cells:
        by_harness.setdefault(c.harness, []).append(c)
    versions = has_named_versions(summary)
    repeats = summary.repeats is not None
    intro = ('<p class="caption">Every task × model cell per harness, with links into the run archive '
             "(relative to this page). S_H, S_A in 0–50; S after hard gates in 0–100. "
             "Not passed = core criterion ids that did not pass (? = unscored), then the diagnostic "
             "criteria that did not (in no score). A cell with one has a criteria page: each criterion's "
             "statement, verdict, reason, evidence and the Trace IR events it cites.</p>")
    out = ['<h2 id="cells">Cells</h2>', intro]
    head = ('<thead><tr><th>Task</th><th>Comp.</th><th>Model</th>' + ("<th>Version</th>" if versions else "")
            + ('<th class="num">Rep.</th>' if repeats else "")
            + '<th class="num">S_H</th><th class="num">S_A</th><th class="num">S</th><th>Label</th>'
            "<th>Not passed</th><th>Archive</th></tr></thead>")
    opened = " open" if len(summary.cells) <= OPEN_CELLS_UP_TO else ""
    for harness in _harness_order(summary):
        rows = sorted(by_harness[harness], key=_cell_order)
        measured = sum(1 for c in rows if c.status == "measured")
        tag = " (calibration)" if rows[0].calibration else ""
        out.append(f'<details{opened} id="cells-{escape(harness)}"><summary><h3>{escape(harness)}</h3>{tag} — '
                   f"{len(rows)} cells, {measured} measured</summary>")
        out.append(f'<div class="scroll"><table>{head}<tbody>')
        out.extend(_cell_row(c, versions, repeats) for c in rows)
        out.append("</tbody></table></div></details>")
    return "\n".join(out)


def drilldown_html(summary: CorpusSummary) -> str:
    """Task × harness grid of every run's S, each linking to its criteria page (or its folder when
    every criterion passed): the heatmap's clickable twin."""
    if not summary.cells:
        return ""
    harnesses = _harness_order(summary)
    at: dict[tuple[str, str], list[CellRow]] = {}
    for c in summary.cells:
        at.setdefault((c.task_id, c.harness), []).append(c)
    tasks = sorted({c.task_id for c in summary.cells}, key=lambda t: ("CEGLOTV?".find(t[:1]), t))
    models = len({c.model for c in summary.cells}) > 1
    repeats = summary.repeats is not None
    cal = {c.harness for c in summary.cells if c.calibration}
    head = "".join(f"<th>{escape(h)}{'<br><small>calibration</small>' if h in cal else ''}</th>" for h in harnesses)
    rows = []
    for t in tasks:
        tds = []
        for h in harnesses:
            links = []
            for c in sorted(at.get((t, h), []), key=_cell_order):
                text = f1(c.effective_score) if c.status == "measured" else c.status.replace("_", " ")
                who = " ".join([*([c.model] if models else []), *([f"#{c.repetition}"] if repeats else [])])
                text = f"{who}: {text}" if who else text
                style = _heat_style(c.effective_score) if c.status == "measured" and c.effective_score is not None else ""
                title = escape(", ".join([*c.failed, *c.diagnostic_failed]) or "every criterion passed")
                links.append(f'<a href="{_page_href(c)}" title="{title}"{style}>{escape(text)}</a>')
            tds.append(f'<td class="grid">{"".join(links) or NA}</td>')
        rows.append(f"<tr><td>{escape(t)}</td>{''.join(tds)}</tr>")
    return ('<h2 id="drilldown">Task × harness drill-down</h2><p class="caption">Effective S of every run; '
            "a link opens the cell's criteria page (or its archive folder when every criterion passed). "
            'Hover for the criteria not passed.</p><div class="scroll"><table class="grid"><thead><tr><th>Task</th>'
            f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def render_html(summary: CorpusSummary, heatmap_png: bytes | None, heatmap_name: str = "heatmap.png") -> str:
    """The whole ``report.html``; ``heatmap_png`` is embedded as a data URI when given."""
    label = summary.protocol_label
    badge_cls = "mixed" if label.startswith("mixed") else ("live" if label == "live" else "")
    tables = all_tables(summary)
    nav = "".join(f'<a href="#{t.key}">{escape(t.title)}</a>' for t in tables[1:])
    nav += '<a href="#heatmap">Heatmap</a><a href="#drilldown">Drill-down</a><a href="#cells">Cells</a>'
    if heatmap_png is not None:
        src = "data:image/png;base64," + base64.b64encode(heatmap_png).decode("ascii")
        heat = (f'<h2 id="heatmap">Task × harness heatmap</h2><p class="caption">Effective S per cell '
                f'(mean over models and repetitions when several ran); grey = no measured run. Also saved as '
                f'<a href="{escape(heatmap_name)}">{escape(heatmap_name)}</a>.</p>'
                f'<img class="heatmap" alt="task by harness heatmap of S" src="{src}">')
    else:
        heat = '<h2 id="heatmap">Task × harness heatmap</h2><p class="caption">no measured runs</p>'
    problems = ""
    if summary.problems:
        items = "".join(f"<li>{escape(p)}</li>" for p in summary.problems)
        problems = f'<h2 id="problems">Consistency warnings ({len(summary.problems)})</h2><ul class="problems">{items}</ul>'
    generated = f" · generated {escape(summary.generated_at)}" if summary.generated_at else ""
    body = "\n".join(table_html(t) for t in tables)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>TraceTrial report ({escape(label)})</title>
<style>{REPORT_CSS}</style></head>
<body><main>
<h1>TraceTrial report <span class="badge {badge_cls}">protocol: {escape(label)}</span></h1>
<p class="caption">Harness reliability measured separately from the model. All rates ×100; — = not available
(empty denominator). Scores from each run's artifacts/llm_judge/combined_score.json{generated}.</p>
<nav>{nav}</nav>
{body}
{heat}
{drilldown_html(summary)}
{cells_html(summary)}
{problems}
</main></body></html>
"""
