"""``tracetrial validate`` reports what a run would reject, on copies of a pack a careless
or hostile author broke (issue 17): escaping paths, Python that does not compile, unknown
rule kinds. Each problem names the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tracetrial.errors import TaskPackErrors
from tracetrial.task import load_task, unsafe_path_reason
from tracetrial_cli.main import validate_packs


def edit_yaml(path: Path, change: Any) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def problems_of(pack: Path) -> list[str]:
    count, problems = validate_packs(pack.parent)
    assert count == 1
    return problems


def loader_errors(pack: Path) -> list[Any]:
    with pytest.raises(TaskPackErrors) as err:
        load_task(pack)
    return err.value.errors


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "out/../../x", "C:\\x"])
def test_expected_output_path_must_stay_in_the_workspace(example_pack: Path, path: str) -> None:
    edit_yaml(example_pack / "task.yaml", lambda d: d["expected_outputs"][0].update(path=path))
    (error,) = loader_errors(example_pack)
    assert error.file.endswith("task.yaml") and error.field == "expected_outputs.0.path"
    assert repr(path) in error.problem and "workspace/" in (error.fix or "")
    assert any("expected_outputs.0.path" in p for p in problems_of(example_pack))


def test_expected_output_schema_file_and_simulator_service_paths(example_pack: Path) -> None:
    def change(d: dict[str, Any]) -> None:
        d["expected_outputs"][0]["schema"] = "../secret.json"
        d["simulators"] = [{"name": "tickets", "service": "/etc/hosts"}]

    edit_yaml(example_pack / "task.yaml", change)
    fields = {e.field: e for e in loader_errors(example_pack)}
    assert "climbs out" in fields["expected_outputs.0.schema"].problem
    # /etc/hosts exists: without the path check the loader would have accepted it.
    assert "is absolute" in fields["simulators.0.service"].problem


def test_rubric_evidence_files_must_stay_in_the_workspace(example_pack: Path) -> None:
    edit_yaml(example_pack / "verifier" / "agent_score.yaml",
              lambda d: d["criteria"][0].setdefault("evidence", {}).update(sources=["workspace"],
                                                                            files=["../../truth.json"]))
    (error,) = loader_errors(example_pack)
    assert error.file.endswith("verifier/agent_score.yaml") and error.field == "criteria.0.evidence.files.0"


@pytest.mark.parametrize("params", [{"kind": "file_exists", "path": "../../etc/passwd"},
                                    {"kind": "archive_json_field", "file": "/etc/s.json", "field": "a", "exists": True},
                                    {"kind": "unchanged_vs_baseline", "paths": ["src/*", "../*"]}])
def test_rule_file_params_must_stay_in_the_run(example_pack: Path, params: dict[str, Any]) -> None:
    edit_yaml(example_pack / "verifier" / "agent_score.yaml", lambda d: d["criteria"][0].update(rule=params))
    problems = problems_of(example_pack)
    assert len(problems) == 1, problems
    assert "verifier/agent_score.yaml: criterion" in problems[0] and f"(kind {params['kind']!r}): param" in problems[0]
    assert "without '..'" in problems[0]


@pytest.mark.parametrize("name", ["probe_policy.py", "verifier/score.py", "simulators/tickets.py"])
def test_python_files_with_a_syntax_error(example_pack: Path, name: str) -> None:
    target = example_pack / name
    target.parent.mkdir(exist_ok=True)
    target.write_text("def broken(:\n    pass\n")
    (error,) = loader_errors(example_pack)
    assert error.file.endswith(name) and "Python syntax error at line 1" in error.problem
    assert "compiles the file without running it" in (error.fix or "")
    assert any(name in p and "syntax error" in p for p in problems_of(example_pack))


def test_compiling_never_executes_the_file(example_pack: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (example_pack / "probe_policy.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n"
        + (example_pack / "probe_policy.py").read_text())
    assert load_task(example_pack).id == example_pack.name
    assert not marker.exists()


@pytest.mark.parametrize("where", ["rule", "bypass", "activation"])
def test_unknown_rule_kind_is_a_validation_problem(example_pack: Path, where: str) -> None:
    harness = example_pack / "verifier" / "harness_score.yaml"
    if where == "activation":
        edit_yaml(harness, lambda d: d["links"][0].update(activation={"kind": "nosuch"}))
    else:
        edit_yaml(harness, lambda d: d["criteria"][0].update({where: {"kind": "nosuch"}}))
    problems = problems_of(example_pack)
    assert len(problems) == 1, problems
    assert "verifier/harness_score.yaml" in problems[0] and "kind 'nosuch'" in problems[0]
    assert "unknown rule kind; known kinds:" in problems[0] and "file_exists" in problems[0]


def test_plain_relative_paths_are_fine() -> None:
    assert [unsafe_path_reason(p) for p in ("status.json", "out/a..b.txt", "*", "./x")] == [None] * 4


def test_the_real_packs_still_validate() -> None:
    count, problems = validate_packs(REPO / "tasks")
    assert count >= 14 and problems == []


def test_one_pack_folder_validates_alone(example_pack: Path) -> None:
    count, problems = validate_packs(example_pack)  # the pack itself, not a folder of packs
    assert (count, problems) == (1, [])
    edit_yaml(example_pack / "verifier" / "harness_score.yaml",
              lambda d: d["criteria"][0].update(rule={"kind": "nosuch"}))
    count, problems = validate_packs(example_pack)
    assert count == 1 and len(problems) == 1 and "kind 'nosuch'" in problems[0]
