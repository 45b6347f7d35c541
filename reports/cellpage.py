"""Drill-down pages: one static HTML page per cell with a failed or unscored criterion.

``<output>/reports/cells/<cell path>.html`` (the cell's folder relative to the output, e.g.
``cells/traces/E1-x-001/probe/codex.html``), linked from the cells table and the drill-down
grid of ``report.html``. For every criterion of the cell (core and diagnostic): its statement
(from the task snapshot the run archived, ``private/task/<task>/verifier/*_score.yaml``), the
verdict and reason from ``combined_score.json``, an evidence excerpt (the criterion's evidence
packet, the judge's rationale and citations, or the verifier's own line for a ``verifier``
rule) and links to the packet, the judge record and the Trace IR events it cites; the cited
events themselves are shown at the end of the page, anchored ``#seq-<n>``.

Every number and text comes from the archive. A page is only built for a cell whose seal
verified when the reports read it (:func:`reports.records.read_run`); files a verdict names
are followed only when they resolve to a regular file inside the cell
(:func:`tracetrial.archive.resolve_inside`). Inline CSS, no script, no external asset.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml
from pydantic import ValidationError

from reports.html import REPORT_CSS
from reports.records import RunRecord
from tracetrial.archive import RunPaths, resolve_inside
from tracetrial.errors import PathEscapeError
from tracetrial.files import atomic_write_text
from tracetrial.results import CombinedScore, CriterionVerdict
from tracetrial.rubric import CriterionSpec, Rubric

__all__ = ["CELLS_DIR", "CellDetail", "CriterionDetail", "cited_seqs", "load_cell_detail", "needs_page",
           "page_path", "render_cell_page", "write_cell_pages"]

#: The pages' folder, relative to ``reports/``.
CELLS_DIR = "cells"
#: Where scoring archives ``score.py``'s output (``criteria.verifier.VERIFIER_OUTPUT``).
VERIFIER_OUTPUT = "evidence/packets/_verifier.json"
#: Characters of an evidence excerpt, and of one cited event, shown on a page.
EXCERPT_CHARS = 1500
EVENT_CHARS = 3000
#: Cited events shown per criterion, and in all on a page (events.json can be large).
MAX_CITED = 12
MAX_EVENTS = 60

# "seq 12", "seq:12", "at seq 3, 5, 7" (rule reasons and judge rationales cite events this way).
# A simulator ledger's "ledger seq 3" is not a Trace IR event.
_SEQ_LIST = re.compile(r"(?<!ledger )\bseq\s*[:#=]?\s*(\d+(?:\s*,\s*\d+)*)", re.IGNORECASE)


def needs_page(r: RunRecord) -> bool:
    """A scored cell (its seal verified) with at least one criterion that did not pass."""
    return r.combined and any(state != "pass" for _id, _layer, state in r.verdicts)


def page_path(rel_path: str) -> str:
    """The page of the cell at ``rel_path`` (relative to the output), relative to ``reports/``."""
    return f"{CELLS_DIR}/{rel_path}.html"


def cited_seqs(text: str) -> list[int]:
    """Trace IR ``seq`` numbers a reason or rationale mentions (``seq 3, 5``, ``seq:12``), in order."""
    out: list[int] = []
    for m in _SEQ_LIST.finditer(text):
        out += [int(x) for x in re.findall(r"\d+", m.group(1))]
    return list(dict.fromkeys(out))


def _ref_seq(ref: object) -> int | None:
    if isinstance(ref, str) and ref.startswith("seq:") and ref[4:].isdigit():
        return int(ref[4:])
    return None


@dataclass(frozen=True)
class CriterionDetail:
    """One criterion as its page shows it (paths relative to the cell folder)."""

    verdict: CriterionVerdict
    statement: str | None
    rule_kind: str | None
    excerpt: str
    excerpt_source: str
    packet: str | None = None
    judge: str | None = None
    seqs: tuple[int, ...] = ()
    #: The task's own check (``verifier/score.py`` of the archived snapshot) for a verifier rule.
    source: str | None = None

    @property
    def state(self) -> str:
        v = self.verdict.passed
        return "unscored" if v is None else ("pass" if v else "fail")


@dataclass
class CellDetail:
    """Everything a cell's page shows, read from the archive."""

    record: RunRecord
    score: CombinedScore
    criteria: list[CriterionDetail]
    events: dict[int, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit} more characters in the file)"


def _json_excerpt(data: object, limit: int = EXCERPT_CHARS) -> str:
    return _clip(json.dumps(data, indent=1, ensure_ascii=False, default=str), limit)


def _read_json(root: Path, rel: str | None) -> tuple[object | None, str | None, str | None]:
    """``(data, rel, problem)`` of a JSON file a verdict names (never followed outside the cell)."""
    if not rel:
        return None, None, None
    try:
        path = resolve_inside(root, rel)
    except PathEscapeError as exc:
        return None, None, str(exc)
    try:
        return json.loads(path.read_text(encoding="utf-8")), rel, None
    except (OSError, ValueError) as exc:
        return None, rel, f"{rel} unreadable: {exc}"


def _rubric_specs(paths: RunPaths, task_id: str, notes: list[str],
                  cache: dict[str, Rubric] | None = None) -> dict[str, CriterionSpec]:
    """Criterion id -> its spec, from the rubrics of the task snapshot the run archived (``cache``:
    rubric text -> parsed rubric, shared by the cells of one write: most cells of a task archive
    the same snapshot)."""
    specs: dict[str, CriterionSpec] = {}
    for name in ("harness_score.yaml", "agent_score.yaml"):
        rel = f"private/task/{task_id}/verifier/{name}"
        try:
            text = resolve_inside(paths.root, rel).read_text(encoding="utf-8")
            rubric = cache.get(text) if cache is not None else None
            if rubric is None:
                rubric = Rubric.model_validate(yaml.safe_load(text))
                if cache is not None:
                    cache[text] = rubric
        except (PathEscapeError, OSError, yaml.YAMLError, ValidationError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            notes.append(f"statements unavailable from {rel}: {first}")
            continue
        specs.update({c.id: c for c in rubric.criteria})
    return specs


def _evidence(paths: RunPaths, task_id: str, v: CriterionVerdict, spec: CriterionSpec | None,
              verifier: object | None) -> CriterionDetail:
    """The excerpt, the files and the cited events of one criterion."""
    root = paths.root
    kind = spec.rule.kind if spec is not None and spec.rule is not None else None
    seqs: list[int] = cited_seqs(v.reason)
    excerpt, source = "", ""
    packet_data, packet, packet_problem = _read_json(root, v.packet_path)
    judge_data, judge, _judge_problem = _read_json(root, v.judge_path)
    parsed = judge_data.get("parsed") if isinstance(judge_data, dict) else None
    if isinstance(parsed, dict):
        citations = [c for c in parsed.get("citations") or [] if isinstance(c, str)]
        seqs += [s for c in citations if (s := _ref_seq(c)) is not None]
        seqs += cited_seqs(str(parsed.get("rationale") or ""))
        excerpt = (f"judge state {parsed.get('state')}: {parsed.get('rationale')}\n"
                   f"citations: {', '.join(citations) or 'none'}")
        source = "judge record"
    if isinstance(packet_data, dict):
        found = packet_data.get("records")
        records: list[Any] = found if isinstance(found, list) else []
        counts = ", ".join(f"{k} {packet_data[k]}" for k in ("scanned", "matched", "returned", "truncated")
                           if k in packet_data)
        # Without a judge's citations, the packet's trace records are the events it rests on.
        if not seqs:
            seqs += [s for r in records if isinstance(r, dict) and (s := _ref_seq(r.get("ref"))) is not None]
        text = f"packet ({counts}):\n" + _json_excerpt(records)
        excerpt = f"{excerpt}\n\n{text}" if excerpt else text
        source = f"{source} and evidence packet" if source else "evidence packet"
    elif packet_problem:
        excerpt, source = packet_problem, "evidence packet (not followed)"
    if not excerpt and kind == "verifier" and isinstance(verifier, dict):
        results = verifier.get("results")
        entry = results.get(v.id) if isinstance(results, dict) else None
        problems = verifier.get("problems")
        problem = problems.get(v.id) if isinstance(problems, dict) else None
        excerpt = _json_excerpt({k: x for k, x in (("result", entry), ("problem", problem), ("error",
                                 verifier.get("error"))) if x is not None}) if entry or problem else ""
        source = "verifier output (verifier/score.py)" if excerpt else ""
        packet = VERIFIER_OUTPUT
    if not excerpt:
        excerpt = "no packet: a deterministic rule; its reason above is the evidence it reports"
        source = "rule"
    check = None
    if kind == "verifier":
        check = f"private/task/{task_id}/verifier/score.py"
        check = check if (root / check).is_file() else None
    return CriterionDetail(verdict=v, statement=spec.statement if spec is not None else None, rule_kind=kind,
                           excerpt=excerpt, excerpt_source=source, packet=packet, judge=judge,
                           seqs=tuple(dict.fromkeys(seqs))[:MAX_CITED], source=check)


def load_cell_detail(output: Path, record: RunRecord, rubrics: dict[str, Rubric] | None = None) -> CellDetail | None:
    """Read what the page of ``record``'s cell shows; ``None`` when it has no readable score
    (tampered, half-written or unscored cells get no page: the reports list them). ``rubrics``
    caches parsed rubric files across cells."""
    if not record.combined:
        return None
    paths = RunPaths(Path(output) / record.rel_path)
    try:
        score = CombinedScore.model_validate_json(paths.combined_score.read_bytes())
    except (OSError, ValueError):
        return None
    notes: list[str] = []
    specs = _rubric_specs(paths, score.identity.task_id, notes, rubrics)
    verifier, _rel, _problem = _read_json(paths.root, VERIFIER_OUTPUT)
    criteria = [_evidence(paths, score.identity.task_id, v, specs.get(v.id), verifier) for v in score.verdicts]
    wanted = list(dict.fromkeys(s for c in criteria if c.state != "pass" for s in c.seqs))[:MAX_EVENTS]
    events: dict[int, dict[str, Any]] = {}
    if wanted:
        try:
            data = json.loads(paths.events.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            notes.append(f"events.json unreadable: {exc}")
            data = []
        by_seq = {e.get("seq"): e for e in data if isinstance(e, dict)} if isinstance(data, list) else {}
        events = {s: by_seq[s] for s in sorted(wanted) if s in by_seq}
        missing = [s for s in wanted if s not in by_seq]
        if missing and isinstance(data, list):
            notes.append(f"cited seq not in events.json: {', '.join(map(str, missing))}")
    return CellDetail(record=record, score=score, criteria=criteria, events=events, notes=notes)


# ------------------------------------------------------------------------------------- render

_PAGE_CSS = """
.verdict { font-weight:700; }
.v-fail { color:#a01818; } .v-unscored { color:#8a5a00; } .v-pass { color:#1d6b2f; }
.role-diagnostic { font-size:12px; background:#eef1f6; border:1px solid var(--line); border-radius:3px; padding:0 4px; }
section.crit { border:1px solid var(--line); border-left:5px solid #a01818; border-radius:6px; padding:8px 12px;
               margin:12px 0; }
section.crit.unscored { border-left-color:#d39b00; }
section.crit h3 { display:block; margin:0 0 4px; }
pre { white-space:pre-wrap; word-break:break-word; background:#f6f7f9; border:1px solid var(--line);
      border-radius:4px; padding:6px 8px; font-size:12px; max-height:420px; overflow:auto; }
dl { display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:4px 0; }
dt { font-weight:600; color:var(--muted); } dd { margin:0; }
"""


def _href(prefix: str, rel: str, anchor: str = "") -> str:
    return escape(quote(prefix + rel, safe="/+-_.=~@") + anchor)


def _verdict_html(state: str) -> str:
    return f'<span class="verdict v-{state}">{state.upper()}</span>'


def _criterion_html(c: CriterionDetail, cell: str) -> str:
    v = c.verdict
    role = ' <span class="role-diagnostic">diagnostic (not in the score)</span>' if v.role == "diagnostic" else ""
    links = []
    if c.packet:
        links.append(f'<a href="{_href(cell, c.packet)}">{"verifier output" if c.packet == VERIFIER_OUTPUT else "evidence packet"}</a>')
    if c.judge:
        links.append(f'<a href="{_href(cell, c.judge)}">judge record</a>')
    if c.source:
        links.append(f'<a href="{_href(cell, c.source)}">the task\'s check (score.py)</a>')
    events = " ".join(f'<a href="#seq-{s}">seq {s}</a>' for s in c.seqs) or "none cited"
    flags = ", ".join(n for n, on in (("bypassed by an agent action", v.bypassed),
                                      ("empty selection", v.empty_selection)) if on)
    kind = v.type + (f" ({c.rule_kind})" if c.rule_kind else "")
    return (f'<section class="crit {c.state}" id="crit-{escape(v.id)}"><h3>[{v.layer}] {escape(v.id)} — '
            f"{_verdict_html(c.state)}{role}</h3><dl>"
            f"<dt>Statement</dt><dd>{escape(c.statement or 'not in the archived task snapshot')}</dd>"
            f"<dt>Verdict</dt><dd>{_verdict_html(c.state)} · {escape(kind)} · raw state "
            f"{escape(str(v.raw_state))}{' · ' + escape(flags) if flags else ''}</dd>"
            f"<dt>Reason</dt><dd>{escape(v.reason)}</dd>"
            f"<dt>Evidence</dt><dd>{escape(c.excerpt_source)}<pre>{escape(c.excerpt)}</pre></dd>"
            f"<dt>Files</dt><dd>{' · '.join(links) or 'none'}</dd>"
            f"<dt>Trace IR events</dt><dd>{events}</dd></dl></section>")


def render_cell_page(detail: CellDetail, to_output: str, report_href: str) -> str:
    """The page of one cell.

    Args:
        detail: what :func:`load_cell_detail` read.
        to_output: relative prefix from the page's folder to the output folder (ends with ``/``).
        report_href: relative link back to ``report.html``.
    """
    r, cs = detail.record, detail.score
    cell = f"{to_output}{r.rel_path}/"
    title = f"{r.task_id} · {r.model} · {r.harness}"
    rep = f" · repetition {r.repetition}" if r.repetition > 1 else ""
    version = f" ({escape(r.harness_version)})" if r.harness_version else ""
    gated = f" (gated from {cs.S:.1f})" if cs.effective_score < cs.S - 1e-9 else ""
    admission = "; ".join(f"{d.check}: {d.reason}" for d in (*cs.admission, *cs.hard_gates) if not d.ok)
    head = [
        ("Cell", f"{escape(r.task_id)} · {escape(r.model)} · {escape(r.harness)}{version}{rep}"
                 + (" · calibration instrument" if r.calibration else "")),
        ("Protocol", escape(cs.identity.protocol)),
        ("Score", f"S_H {cs.S_H:.1f} + S_A {cs.S_A:.1f} = S {cs.effective_score:.1f}{gated} · harness "
                  f"{cs.harness.p}/{cs.harness.n}, agent {cs.agent.p}/{cs.agent.n}, unscored "
                  f"{cs.harness.unscored}/{cs.agent.unscored}"),
        ("Admitted", "yes" if cs.admitted else f"<b>no</b>: {escape(admission)}"),
        ("Label", f"{escape(cs.attribution.label)} (rule {cs.attribution.label_rule}); "
                  f"{len(cs.attribution.L_act)} activated link(s)"
                  + "".join(f"; {escape(str(link.get('harness')))} → {escape(str(link.get('agent')))}"
                            for link in cs.attribution.L_act)),
        ("Archive", " · ".join(f'<a href="{_href(cell, rel)}">{escape(name)}</a>' for name, rel in (
            ("folder", ""), ("combined_score.json", "artifacts/llm_judge/combined_score.json"),
            ("events.json", "events.json"), ("result.json", "result.json"),
            ("workspace.diff", "evidence/workspace.diff")))),
    ]
    if admission and cs.admitted:
        head.append(("Hard gates", escape(admission)))
    rows = "".join(f"<tr><td>{k}</td><td class=\"wrap\">{v}</td></tr>" for k, v in head)
    not_passed = [c for c in detail.criteria if c.state != "pass"]
    index = "".join(
        f'<tr><td><a href="#crit-{escape(c.verdict.id)}">{escape(c.verdict.id)}</a></td><td>{c.verdict.layer}</td>'
        f"<td>{c.verdict.role}</td><td>{_verdict_html(c.state)}</td>"
        f'<td class="wrap">{escape(c.statement or "")}</td></tr>' for c in detail.criteria)
    events = []
    for seq, ev in detail.events.items():
        shown = {k: x for k, x in ev.items() if k != "raw_event"}
        events.append(f'<section id="seq-{seq}"><h3>seq {seq} · {escape(str(ev.get("event_type")))}</h3>'
                      f"<pre>{escape(_json_excerpt(shown, EVENT_CHARS))}</pre></section>")
    notes = "".join(f"<li>{escape(n)}</li>" for n in detail.notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title>
<style>{REPORT_CSS}{_PAGE_CSS}</style></head>
<body><main>
<p><a href="{escape(report_href)}">← report</a></p>
<h1>{escape(title)}</h1>
<table class="kv"><tbody>{rows}</tbody></table>
<h2 id="criteria">Criteria ({len(not_passed)} of {len(detail.criteria)} not passed)</h2>
<div class="scroll"><table><thead><tr><th>Criterion</th><th>Layer</th><th>Role</th><th>Verdict</th>
<th>Statement</th></tr></thead><tbody>{index}</tbody></table></div>
{"".join(_criterion_html(c, cell) for c in not_passed)}
<h2 id="events">Trace IR events cited ({len(detail.events)})</h2>
<p class="caption">From <a href="{_href(cell, 'events.json')}">events.json</a>, without raw_event;
long events are cut.</p>
{"".join(events) or '<p class="caption">none</p>'}
{f'<h2>Notes</h2><ul class="problems">{notes}</ul>' if notes else ""}
</main></body></html>
"""


def write_cell_pages(output: Path, runs: list[RunRecord]) -> list[Path]:
    """Write the page of every cell that needs one under ``<output>/reports/cells/`` (the folder
    is rebuilt: a cell that now passes keeps no stale page). Returns the pages written."""
    output = Path(output)
    root = output / "reports" / CELLS_DIR
    if root.is_dir():
        shutil.rmtree(root)
    written: list[Path] = []
    rubrics: dict[str, Rubric] = {}
    for r in runs:
        if not needs_page(r):
            continue
        detail = load_cell_detail(output, r, rubrics)
        if detail is None:
            continue
        rel = page_path(r.rel_path)
        target = output / "reports" / rel
        depth = len(Path(rel).parts) - 1  # folders between reports/ and the page
        to_reports = "../" * depth
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, render_cell_page(detail, to_reports + "../", to_reports + "report.html"))
        written.append(target)
    return written
