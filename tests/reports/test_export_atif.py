"""ATIF v1.7 export: the pure mapping (fast, hand-built cell) and real probe cells validated
with Harbor's own pydantic models (slow)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from reports.export import export_atif, load_cell, to_atif
from reports.export.write import atif_path, cell_dirs
from tests.reports.export_fixtures import RUN, fake_cell, probe_archive
from tracetrial.archive import verify_manifest
from tracetrial_cli.main import main as cli

HARBOR = "harbor==0.25.0"


def agent_steps(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in t["steps"] if s["source"] == "agent"]


def all_trajectories(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [t, *(x for sub in t.get("subagent_trajectories", []) for x in all_trajectories(sub))]


def check_invariants(t: dict[str, Any], provider_requests: int) -> None:
    """What every export must satisfy, whatever the harness."""
    assert t["schema_version"] == "ATIF-v1.7"
    trajectories = all_trajectories(t)
    # One agent step per model call: every provider request is a step, none twice.
    indices = [s["extra"].get("gateway_request_index") for x in trajectories for s in agent_steps(x)]
    assert sorted(i for i in indices if i is not None) == list(range(provider_requests))
    for x in trajectories:
        assert [s["step_id"] for s in x["steps"]] == list(range(1, len(x["steps"]) + 1))
        for step in x["steps"]:
            calls = {c["tool_call_id"] for c in step.get("tool_calls", [])}
            for result in step.get("observation", {}).get("results", []):
                if result.get("source_call_id") is not None:
                    assert result["source_call_id"] in calls


def test_steps_are_model_calls_with_gateway_metrics() -> None:
    t = to_atif(fake_cell())
    check_invariants(t, provider_requests=5)
    main = agent_steps(t)
    assert len(main) + len(agent_steps(t["subagent_trajectories"][0])) == 5
    assert all(s["llm_call_count"] == 1 for s in main)
    assert main[0]["metrics"] == {"prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 40,
                                  "extra": {"cache_write_tokens": 5}}
    assert main[-1]["message"] == "all done" and main[-1]["reasoning_content"] == "thinking hard"
    assert t["steps"][0] == {"source": "user", "message": "do the job", "timestamp": "2026-12-01T12:00:00+00:00",
                             "step_id": 1}
    assert t["final_metrics"]["total_prompt_tokens"] == sum(100 + i for i in range(5))
    assert t["final_metrics"]["total_steps"] == len(t["steps"])


def test_tool_calls_carry_their_results_by_id() -> None:
    t = to_atif(fake_cell())
    first = agent_steps(t)[0]
    assert first["tool_calls"] == [{"tool_call_id": "c1", "function_name": "Bash",
                                    "arguments": {"command": first["tool_calls"][0]["arguments"]["command"]}}]
    (result,) = first["observation"]["results"]
    assert result["source_call_id"] == "c1" and result["content"].startswith("out ")
    assert result["extra"] == {"exit_code": 0}
    # A call with no native result gets no invented observation.
    child_first = agent_steps(t["subagent_trajectories"][0])[0]
    assert child_first["tool_calls"][0]["tool_call_id"] == "c3" and "observation" not in child_first


def test_subagent_is_embedded_and_referenced_from_its_spawn_call() -> None:
    t = to_atif(fake_cell())
    (sub,) = t["subagent_trajectories"]
    assert sub["trajectory_id"] == f"{RUN}/c2" and sub["agent"]["extra"]["principal_id"] == "c2"
    assert [s["message"] for s in agent_steps(sub)] == ["", "child answer"]
    # Its inventory is the one of the requests its calls made, not the parent's.
    assert [d["function"]["name"] for d in sub["agent"]["tool_definitions"]] == ["Bash"]
    spawn = agent_steps(t)[1]
    assert spawn["tool_calls"][0]["tool_call_id"] == "c2"
    (ref,) = spawn["observation"]["results"][0]["subagent_trajectory_ref"]
    assert ref["trajectory_id"] == sub["trajectory_id"]


def test_compaction_uses_the_context_management_convention() -> None:
    t = to_atif(fake_cell())
    (step,) = [s for s in t["steps"] if s["source"] == "system"]
    assert step["extra"]["context_management"] == {"type": "compaction", "boundary": "replace"}
    assert step["observation"]["results"] == [{"content": "summary of the work so far"}]


def test_tool_definitions_come_from_the_gateway_inventory() -> None:
    t = to_atif(fake_cell())
    assert t["agent"]["tool_definitions"] == [
        {"type": "function", "function": {"name": "Bash", "description": "run a command",
                                          "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "Agent", "description": "start a helper",
                                          "parameters": {"type": "object"}}},
    ]


def test_unexplained_provider_requests_are_kept_as_steps() -> None:
    cell = fake_cell()
    extra = dict(cell.records[0], index=5, tool_results=[{"id": "unknown", "is_error": None, "size": 0,
                                                           "sha256": "0", "content": "", "content_truncated": False}])
    cell.records.append(extra)
    t = to_atif(cell)
    check_invariants(t, provider_requests=6)
    assert t["steps"][-1]["extra"]["native_content"] is False
    assert t["extra"]["tracetrial"]["unmatched_provider_requests"] == [5]


def test_unreadable_cell_is_reported_and_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cell = tmp_path / "traces" / "T1-demo-001" / "probe" / "fake"
    cell.mkdir(parents=True)
    (cell / "events.json").write_text("[")
    assert cli(["export", "atif", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert f"{cell / 'result.json'}: no such file" in out.err
    assert "exported 0 ATIF trajectory file(s); 1 cell(s) failed" in out.out


# --------------------------------------------------------------------------- real cells (slow)


def python312() -> str | None:
    """A working Python >= 3.12 (pyenv installs first: its shims exist but may not be active)."""
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    candidates += [p for p in (shutil.which("python3.12"), shutil.which("python3.13")) if p]
    for candidate in candidates:
        probe = subprocess.run([candidate, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                               capture_output=True, check=False)
        if probe.returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="module")
def harbor_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    interpreter = python312()
    if interpreter is None:
        pytest.skip("Harbor needs Python >= 3.12 and no python3.12 was found (PATH or ~/.pyenv/versions)")
    venv = tmp_path_factory.mktemp("harbor-venv")
    subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    proc = subprocess.run([py, "-m", "pip", "install", "-q", HARBOR], capture_output=True, text=True, timeout=900,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return py


@pytest.mark.slow
def test_real_cells_export_and_validate_with_harbor(harbor_python: str, capsys: pytest.CaptureFixture[str]) -> None:
    archive = probe_archive()
    cells = cell_dirs(archive)
    assert cli(["export", "atif", str(archive)]) == 0
    assert f"exported {len(cells)} ATIF trajectory file(s)" in capsys.readouterr().out
    files = [atif_path(archive, c) for c in cells]
    for cell, path in zip(cells, files):
        assert verify_manifest(cell).ok, "an export must not break the sealed manifest"
        t = json.loads(path.read_text())
        check_invariants(t, provider_requests=len(load_cell(cell).records))
        assert t["agent"]["tool_definitions"], "the gateway saw an inventory in every cell"
    l4 = [json.loads(p.read_text()) for p in files if "L4-pending-report-001" in str(p)]
    assert l4 and all(t.get("subagent_trajectories") for t in l4), "L4 delegates to a sub-agent"
    script = ("import json, sys\nfrom harbor.models.trajectories import Trajectory\n"
              "for p in sys.argv[1:]:\n    Trajectory.model_validate(json.load(open(p)))\nprint(len(sys.argv) - 1)\n")
    proc = subprocess.run([harbor_python, "-c", script, *map(str, files)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == str(len(files))


@pytest.mark.slow
def test_real_cells_export_under_out(tmp_path: Path) -> None:
    archive = probe_archive()
    outcome = export_atif(archive, tmp_path)
    assert not outcome.failed
    assert sorted(outcome.written) == sorted(tmp_path / c.relative_to(archive / "traces") / "trajectory.json"
                                             for c in cell_dirs(archive))
