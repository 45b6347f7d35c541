"""The committed probe baseline and the example workflow stay usable."""

from __future__ import annotations

import yaml

from ci.baseline import load
from harnesses.registry import get_harness
from tests.conftest import REPO
from tracetrial.eligibility import eligibility
from tracetrial.task import TaskPack, discover

BASELINE = REPO / "ci" / "baselines" / "probe.json"
HARNESSES = ("claude_code", "codex", "reference")
RERECORD = ("the task suite changed: re-record the baseline with `pytest tasks/ --tt-harness claude_code,codex,"
            "reference --tt-output OUT` then `tracetrial gate --update --baseline ci/baselines/probe.json OUT`")


def test_probe_baseline_covers_the_task_suite_per_harness() -> None:
    baseline = load(BASELINE)
    assert baseline.protocol == "probe"
    assert set(baseline.harness_versions) == set(HARNESSES)
    assert all(baseline.harness_versions.values())
    packs = [p for p in discover(REPO / "tasks") if isinstance(p, TaskPack)]
    # a pair that is not eligible (unsupported, non_comparable) has no verdicts to record
    caps = {h: get_harness(h, installed=False).capabilities for h in HARNESSES}
    pairs = [(p, h) for p in packs for h in HARNESSES if eligibility(p, caps[h])[0] == "eligible"]
    assert set(baseline.cells) == {f"{p.id}/probe/{h}" for p, h in pairs}, RERECORD
    for pack, h in pairs:
        probe = pack.for_protocol("probe")  # live-only (judged) criteria are not part of a probe run
        ids = {c.id for c in (*probe.harness_rubric.criteria, *probe.agent_rubric.criteria)}
        assert set(baseline.cells[f"{pack.id}/probe/{h}"]) == ids, f"{pack.id}/{h}: {RERECORD}"


def test_probe_baseline_is_in_stable_form() -> None:
    """Stored exactly as ``tracetrial gate --update`` writes it (so re-recording gives clean diffs)."""
    assert load(BASELINE).to_json() == BASELINE.read_text(encoding="utf-8")


def test_workflow_example_installs_runs_gates_and_publishes() -> None:
    path = REPO / "ci" / "github-workflow.example.yml"
    steps = yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"]["probe-gate"]["steps"]
    commands = "\n".join(str(s.get("run", "")) for s in steps)
    assert "scripts/setup.sh" in commands
    assert "pytest tasks/" in commands and '--tt-harness "$HARNESS"' in commands and "--alluredir" in commands
    assert "tracetrial gate --baseline" in commands
    assert "allure-commandline generate" in commands
    uploads = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact")]
    assert any("allure-report" in str(s["with"]["path"]) for s in uploads)


#: What re-records the committed baseline (ci/README.md); the reference harness's version is
#: a hash of its source, so any change under harnesses/reference/ needs it.
UPDATE = ("re-record the baseline: `pytest tasks/ --tt-harness claude_code,codex,reference --tt-output OUT` "
          "then `tracetrial gate --update --baseline ci/baselines/probe.json OUT`")


def test_probe_baseline_records_the_current_reference_harness() -> None:
    """The README's `tracetrial gate --baseline ci/baselines/probe.json outputs/` refuses (exit 3)
    a run whose reference-harness version differs from the baseline's: the committed baseline
    must be re-recorded whenever the harness's source changes (issue 17)."""
    from harnesses.reference.adapter import ReferenceAdapter, source_digest

    current = ReferenceAdapter().version()
    assert current.endswith(f"+src.{source_digest()}")
    recorded = load(BASELINE).harness_versions["reference"]
    assert recorded == current, f"baseline has reference {recorded}, the source is {current}: {UPDATE}"


def test_the_suite_table_lists_every_pack_with_its_taxonomy() -> None:
    import re

    from tracetrial.taxonomy import COMPONENTS

    rows = {}
    for line in (REPO / "tasks" / "README.md").read_text(encoding="utf-8").splitlines():
        if re.match(r"\| `[CEGLOTV][0-9]-", line):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells
    packs = [p for p in discover(REPO / "tasks") if isinstance(p, TaskPack)]
    assert set(rows) == {p.id for p in packs}
    for pack in packs:
        assert rows[pack.id][1:4] == [COMPONENTS[pack.spec.component], pack.spec.property, pack.spec.surface], pack.id
