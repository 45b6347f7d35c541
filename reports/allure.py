"""Allure enrichment of one cell test (allure-pytest).

The plugin calls :func:`attach_cell` inside each cell test, after scoring. With
``--alluredir`` the result then carries:

* labels: epic = component name, feature = property, story = task id,
  suite = harness; parameter ``model``; tags for the protocol and the run label;
* one step per criterion (``[harness] H2 — FAIL``) with its verdict, reason and
  evidence packet (and judge record) attached; failed criteria are failed steps,
  unscored ones skipped steps — the test outcome itself is left to the plugin;
* attachments: ``combined_score.json``, ``events.json``, ``evidence/workspace.diff``, the cell's
  drill-down page (``cell page.html``: each criterion's statement, verdict, reason, evidence
  excerpt and cited Trace IR events, as ``tracetrial report`` writes it; its links point into the
  archive) and the cell's ATIF v1.7 trajectory (``trajectory.atif.json``). A cell that cannot
  give one of them gets a text attachment saying why instead.

Without ``--alluredir`` every call is a no-op (allure's hooks have no listener).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import json

import allure
import allure_commons
import pytest
import yaml

from tracetrial.archive import RunPaths, resolve_inside
from tracetrial.errors import PathEscapeError
from tracetrial.results import CombinedScore, CriterionVerdict, ResultRecord
from tracetrial.taxonomy import COMPONENTS

# allure-python is untyped: use it through these names only.
_dynamic: Any = allure.dynamic
_attach: Any = allure.attach
_step: Any = allure.step
_JSON: Any = allure.attachment_type.JSON
_TEXT: Any = allure.attachment_type.TEXT
_HTML: Any = allure.attachment_type.HTML


def _listening() -> bool:
    """Whether anything receives attachments (allure-pytest's listener under ``--alluredir``):
    the page and the trajectory are built only then, so a run without Allure pays nothing."""
    return bool(allure_commons.plugin_manager.hook.attach_data.get_hookimpls())


def _attach_views(paths: RunPaths) -> None:
    """The cell's drill-down page and ATIF trajectory, or a note saying why either is missing."""
    from reports.cellpage import load_cell_detail, render_cell_page
    from reports.export.atif import to_atif
    from reports.export.calls import load_cell
    from reports.records import read_run

    output = paths.root.parents[3]  # <output>/traces/<task>/<model>/<harness>
    try:
        detail = load_cell_detail(output, read_run(output, paths.root, {}))
        if detail is None:
            _attach("no readable combined score: the cell has no drill-down page", name="cell page (missing)",
                    attachment_type=_TEXT)
        else:
            to_output = "../" * (len(paths.root.relative_to(output).parts))
            _attach(render_cell_page(detail, to_output, to_output + "reports/report.html"), name="cell page",
                    attachment_type=_HTML)
    except Exception as exc:  # noqa: BLE001 - an attachment must never fail the cell's test
        _attach(f"cell page not rendered: {type(exc).__name__}: {exc}", name="cell page (missing)",
                attachment_type=_TEXT)
    try:
        trajectory = to_atif(load_cell(paths.root))
        _attach(json.dumps(trajectory, indent=1, ensure_ascii=False), name="trajectory.atif.json",
                attachment_type=_JSON)
    except Exception as exc:  # noqa: BLE001 - e.g. an unreadable events.json: say so, keep the test
        _attach(f"ATIF trajectory not exported: {type(exc).__name__}: {exc}", name="trajectory.atif.json (missing)",
                attachment_type=_TEXT)


def verdict_word(v: CriterionVerdict) -> str:
    """``PASS`` / ``FAIL`` / ``UNSCORED`` (unscored is never a pass)."""
    return "UNSCORED" if v.passed is None else ("PASS" if v.passed else "FAIL")


def step_title(v: CriterionVerdict) -> str:
    notes = [n for n, on in (("bypassed", v.bypassed), ("empty selection", v.empty_selection)) if on]
    extra = f" ({', '.join(notes)})" if notes else ""
    return f"[{v.layer}] {v.id} — {verdict_word(v)}{extra}"


def _attach_file(root: Path, rel: str | None, name: str) -> bool:
    """Attach a file of the run folder; paths outside it (or missing) are not followed."""
    if not rel:
        return False
    try:
        path = resolve_inside(root, rel)
    except PathEscapeError:
        return False
    kind = _JSON if path.suffix == ".json" else _TEXT
    _attach.file(str(path), name=name, attachment_type=kind)
    return True


def _task_snapshot(paths: RunPaths, task_id: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load((paths.private / "task" / task_id / "task.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _criterion_step(root: Path, v: CriterionVerdict) -> None:
    """One step per criterion; its status comes from the verdict, never from an exception."""
    step = _step(step_title(v))
    step.__enter__()
    _attach(f"{verdict_word(v)} ({v.type}, {v.role}, raw state {v.raw_state})\n{v.reason}",
                  name=f"{v.id} verdict", attachment_type=_TEXT)
    if not _attach_file(root, v.packet_path, f"{v.id} evidence packet") and v.packet_path:
        _attach(f"evidence packet {v.packet_path!r} is not a file inside the run folder",
                      name=f"{v.id} evidence packet (missing)", attachment_type=_TEXT)
    _attach_file(root, v.judge_path, f"{v.id} judge record")
    exc: BaseException | None = None
    if v.passed is False:
        exc = AssertionError(f"{v.id}: {v.reason}")
    elif v.passed is None:
        exc = pytest.skip.Exception(f"{v.id} unscored: {v.reason}")
    step.__exit__(type(exc) if exc else None, exc, None)


def attach_cell(run_dir: Path | RunPaths, cs: CombinedScore | None = None, *,
                prop: str | None = None, component: str | None = None) -> None:
    """Label the current test as one cell and attach its criteria and archive files.

    Args:
        run_dir: the cell's run folder (or its :class:`RunPaths`).
        cs: its combined score; read from ``artifacts/llm_judge/combined_score.json``
            when omitted. A cell without one is labelled from ``result.json`` and
            gets no criterion steps.
        prop, component: the task's property and component letter; read from the
            task snapshot (``private/task/<task_id>/task.yaml``) when omitted.
    """
    paths = run_dir if isinstance(run_dir, RunPaths) else RunPaths(Path(run_dir))
    if cs is None and paths.combined_score.is_file():
        cs = CombinedScore.model_validate_json(paths.combined_score.read_bytes())
    identity = cs.identity if cs is not None else None
    if identity is None and paths.result.is_file():
        identity = ResultRecord.model_validate_json(paths.result.read_bytes()).identity
    task_id = identity.task_id if identity else paths.root.parent.parent.name
    model = identity.model if identity else paths.root.parent.name
    harness = identity.harness if identity else paths.root.name
    if prop is None or component is None:
        snap = _task_snapshot(paths, task_id)
        prop = prop or snap.get("property")
        component = component or snap.get("component")
    letter = task_id[:1] if task_id[:1] in COMPONENTS else (component or "")

    _dynamic.epic(COMPONENTS.get(letter, "Unknown component"))
    _dynamic.feature(str(prop or "unknown property"))
    _dynamic.story(task_id)
    _dynamic.suite(harness)
    _dynamic.parameter("model", model)
    if identity is not None:
        _dynamic.tag(f"protocol:{identity.protocol}")

    if cs is None:
        _dynamic.description(f"Not scored: no combined_score.json in {paths.root}.")
        _attach_file(paths.root, "result.json", "result.json")
    else:
        att = cs.attribution
        _dynamic.tag(f"label:{att.label}")
        _dynamic.description(
            f"S_H {cs.S_H:.1f} + S_A {cs.S_A:.1f} = S {cs.S:.1f} (effective {cs.effective_score:.1f}); "
            f"harness {cs.harness.p}/{cs.harness.n}, agent {cs.agent.p}/{cs.agent.n}, "
            f"unscored {cs.harness.unscored + cs.agent.unscored}; admitted: {cs.admitted}; "
            f"label {att.label} (rule {att.label_rule}); activated links {len(att.L_act)}.")
        for verdict in cs.verdicts:
            _criterion_step(paths.root, verdict)
        _attach_file(paths.root, "artifacts/llm_judge/combined_score.json", "combined_score.json")
    _attach_file(paths.root, "events.json", "events.json")
    _attach_file(paths.root, "evidence/workspace.diff", "workspace.diff")
    if _listening():
        _attach_views(paths)
