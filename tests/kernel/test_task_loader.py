"""Task-pack loader: a good pack loads; broken packs get errors naming file, field and fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tracetrial.errors import TaskPackErrors
from tracetrial.task import BrokenPack, TaskPack, discover, load_task


def edit_yaml(path: Path, **changes: object) -> None:
    data = yaml.safe_load(path.read_text())
    data.update(changes)
    path.write_text(yaml.safe_dump(data))


def errors_of(pack: Path) -> str:
    with pytest.raises(TaskPackErrors) as info:
        load_task(pack)
    return str(info.value)


def test_example_pack_loads(example_pack: Path) -> None:
    task = load_task(example_pack)
    assert task.id == "E1-build-status-001"
    assert task.component_name == "Execution"
    assert [t.user for t in task.user_turns][0].startswith("Run the build")
    assert {c.layer for c in task.harness_rubric.criteria} == {"harness"}
    assert task.truth == {"exit_code": 3, "build": "failed"}


def test_malformed_yaml_names_line(example_pack: Path) -> None:
    (example_pack / "task.yaml").write_text("id: E1-build-status-001\ntitle: [unclosed\n")
    msg = errors_of(example_pack)
    assert "task.yaml: malformed YAML at line" in msg and "fix the YAML syntax" in msg


def test_malformed_turns_json(example_pack: Path) -> None:
    (example_pack / "turns.json").write_text('{"turns": [}')
    msg = errors_of(example_pack)
    assert "turns.json: malformed JSON at line 1, column 12" in msg


def test_id_must_match_folder(example_pack: Path) -> None:
    edit_yaml(example_pack / "task.yaml", id="E1-build-status-002")
    msg = errors_of(example_pack)
    assert "field 'id'" in msg and "does not match the folder name 'E1-build-status-001'" in msg


def test_id_naming_another_component_is_refused(example_pack: Path) -> None:
    """``-k Governance`` would select an Execution cell whose id says "governance"."""
    renamed = example_pack.parent / "E1-governance-check-001"
    example_pack.rename(renamed)
    edit_yaml(renamed / "task.yaml", id="E1-governance-check-001")
    msg = errors_of(renamed)
    assert "contains another component's name" in msg and "'E1-gov-check-001'" in msg


def test_property_outside_component(example_pack: Path) -> None:
    edit_yaml(example_pack / "task.yaml", property="tool_error_relay")
    msg = errors_of(example_pack)
    assert "not a Execution property" in msg and "exit_code_fidelity" in msg


def test_missing_prompt_and_rubric(example_pack: Path) -> None:
    (example_pack / "prompt.md").unlink()
    (example_pack / "verifier" / "agent_score.yaml").unlink()
    msg = errors_of(example_pack)
    assert "prompt.md: file is missing" in msg
    assert "verifier/agent_score.yaml: file is missing" in msg
    assert "2 problem(s)" in msg


def test_link_to_unknown_criterion(example_pack: Path) -> None:
    path = example_pack / "verifier" / "harness_score.yaml"
    data = yaml.safe_load(path.read_text())
    data["links"][0]["agent"] = "A9-nope"
    path.write_text(yaml.safe_dump(data))
    msg = errors_of(example_pack)
    assert "field 'links.0.agent'" in msg and "unknown agent criterion 'A9-nope'" in msg


def test_rule_criterion_without_rule(example_pack: Path) -> None:
    path = example_pack / "verifier" / "agent_score.yaml"
    data = yaml.safe_load(path.read_text())
    del data["criteria"][0]["rule"]
    path.write_text(yaml.safe_dump(data))
    msg = errors_of(example_pack)
    assert "agent_score.yaml, field 'criteria.0'" in msg and "needs a 'rule: {kind: ...}' block" in msg


def test_private_truth_inside_workspace(example_pack: Path) -> None:
    (example_pack / "workspace" / "truth.json").write_text(json.dumps({"x": 1}))
    msg = errors_of(example_pack)
    assert "private file inside the agent-writable workspace" in msg


def test_governance_task_cannot_bypass_permissions(example_pack: Path, tmp_path: Path) -> None:
    target = example_pack.parent / "G1-deny-rm-001"
    example_pack.rename(target)
    edit_yaml(target / "task.yaml", id="G1-deny-rm-001", component="G", property="execution_governance")
    msg = errors_of(target)
    assert "must not run the harness with permissions bypassed" in msg


def test_broken_pack_does_not_hide_others(example_pack: Path) -> None:
    broken = example_pack.parent / "E2-broken-thing-001"
    broken.mkdir()
    (broken / "task.yaml").write_text("id: [")
    found = discover(example_pack.parent)
    assert [type(p) for p in found] == [TaskPack, BrokenPack]
    assert isinstance(found[1], BrokenPack) and "malformed YAML" in str(found[1].error)


@pytest.mark.parametrize("form", ["flow", "block"])
def test_an_unquoted_secret_is_refused_where_the_snapshot_would_break(example_pack: Path, form: str) -> None:
    """The archive seals a redacted snapshot of task.yaml ([REDACTED] for every planted secret);
    unquoted, that is a YAML list and the archived cell could never be re-scored."""
    path = example_pack / "task.yaml"
    text = path.read_text(encoding="utf-8")
    line = "secrets: [ttk_live_a8f3c2d9e1b7]\n" if form == "flow" else "secrets:\n  - ttk_live_a8f3c2d9e1b7\n"
    path.write_text(text + line, encoding="utf-8")
    message = errors_of(example_pack)
    assert "secrets" in message and "not quoted" in message and "quote every secret" in message
    path.write_text(text + 'secrets: ["ttk_live_a8f3c2d9e1b7"]\n', encoding="utf-8")
    assert load_task(example_pack).spec.secrets == ["ttk_live_a8f3c2d9e1b7"]
    # what the archive keeps loads too
    path.write_text(text + 'secrets: ["[REDACTED]"]\n', encoding="utf-8")
    assert load_task(example_pack).spec.secrets == ["[REDACTED]"]


def _two_turns(pack: Path, boundary: dict[str, object] | None) -> None:
    (pack / "turns.json").write_text(json.dumps({"turns": [{"user": "Continue where you left off.",
                                                            "session_boundary": boundary}]}))
    edit_yaml(pack / "task.yaml", conversation="multi", budgets={"max_user_turns": 2})


def test_an_interrupted_turn_followed_by_a_resume_loads(example_pack: Path) -> None:
    _two_turns(example_pack, {"kind": "resume"})
    edit_yaml(example_pack / "task.yaml", interrupts=[{"turn": 1, "marker": ".tt-kill"}])
    task = load_task(example_pack)
    assert [(i.turn, i.marker) for i in task.spec.interrupts] == [(1, ".tt-kill")]


@pytest.mark.parametrize(("boundary", "interrupts", "expected"), [
    ({"kind": "resume"}, [{"turn": 2, "marker": ".tt-kill"}], "turn 2 is interrupted but no turn follows it"),
    (None, [{"turn": 1, "marker": ".tt-kill"}], "turn 2 follows an interrupted turn but does not resume its session"),
    ({"kind": "new_session"}, [{"turn": 1, "marker": ".tt-kill"}], "does not resume its session"),
    ({"kind": "resume"}, [{"turn": 1, "marker": "../outside"}], "path '../outside'"),
    ({"kind": "resume"}, [{"turn": 1, "marker": "/tmp/kill"}], "path '/tmp/kill'"),
    ({"kind": "resume"}, [{"turn": 1, "marker": "a"}, {"turn": 1, "marker": "b"}], "turn 1 is interrupted twice"),
])
def test_an_interrupt_that_cannot_be_resumed_or_escapes_the_workspace_is_refused(
        example_pack: Path, boundary: dict[str, object] | None, interrupts: list[dict[str, object]],
        expected: str) -> None:
    _two_turns(example_pack, boundary)
    edit_yaml(example_pack / "task.yaml", interrupts=interrupts)
    msg = errors_of(example_pack)
    assert expected in msg
