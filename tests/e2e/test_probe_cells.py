"""End to end: real harness CLIs -> real LiteLLM gateway -> probe model -> archive -> score.

Runs the example task through the plugin exactly as a user would
(``pytest tasks/ ...``) and checks the archive a user would read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from criteria.rescore import rescore_output
from harnesses.install import tool_bin
from tests.conftest import REPO
from tracetrial.archive import RunPaths, verify_manifest
from tracetrial.results import CombinedScore, ResultRecord
from tracetrial.trace import ToolEvent
from tracetrial.trace_io import load_events
from tracetrial_cli.main import SCHEMA_FILE

TASK = "E1-build-status-001"
HARNESSES = ("claude_code", "codex")


def run_cells(output: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-p", "no:cacheprovider",
           f"--tt-output={output}", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [h for h, b in (("claude_code", "claude"), ("codex", "codex")) if tool_bin(b) is None]
    if missing:
        pytest.skip(f"not installed: {missing}; run: tracetrial install claude_code codex")
    out = tmp_path_factory.mktemp("e2e")
    proc = run_cells(out, "-k", TASK, "--tt-harness", ",".join(HARNESSES))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return out


@pytest.mark.parametrize("harness", HARNESSES)
def test_archive_is_complete_and_scored(archive: Path, harness: str) -> None:
    paths = RunPaths.for_cell(archive, TASK, "probe", harness)
    for rel in ("result.json", "events.json", "summary.json", "manifest.json", "gateway/requests.jsonl",
                "gateway/probe.json", "evidence/workspace.diff", "artifacts/llm_judge/combined_score.json"):
        assert (paths.root / rel).is_file(), rel
    assert verify_manifest(paths.root).ok
    events = load_events(paths.events)  # schema-valid, contiguous seq
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(paths.events.read_text()), json.loads(SCHEMA_FILE.read_text()))
    kinds = [e.event_type for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert "tool_inventory" in kinds and "provider_request_count" in kinds
    build = [e for e in events if isinstance(e, ToolEvent) and e.tool_result is not None
             and "BUILD SUCCESS" in str(e.tool_result.content)]
    assert build, "the build's tool call and result are in the trace"
    result = ResultRecord.model_validate_json(paths.result.read_text())
    assert result.identity.harness == harness and result.identity.protocol == "probe"
    assert result.identity.harness_version
    score = CombinedScore.model_validate_json(paths.combined_score.read_text())
    assert score.admitted and score.combined_pass, [v for v in score.verdicts if not v.passed]
    assert score.identity.run_id == events[0].run_id


#: The phases every executed cell times into result.json (issue 25), in the order they run.
PHASES = ("pack_copy", "workspace", "simulators", "sandbox_prepare", "gateway_route", "execution", "collection",
          "normalization", "evidence")


@pytest.mark.parametrize("harness", HARNESSES)
def test_result_records_where_the_cells_time_went(archive: Path, harness: str) -> None:
    result = ResultRecord.model_validate_json(RunPaths.for_cell(archive, TASK, "probe", harness).result.read_text())
    assert tuple(result.timing) == PHASES
    spans = [result.timing[p] for p in PHASES]
    assert all(s.seconds is not None and s.seconds >= 0 and s.finished_at is not None for s in spans)
    # one after the other, never overlapping: the breakdown adds up to the cell's own time
    assert all(a.finished_at <= b.started_at for a, b in zip(spans, spans[1:], strict=False))


def test_rescore_is_byte_identical(archive: Path) -> None:
    files = sorted(archive.glob("traces/*/*/*/artifacts/llm_judge/combined_score.json"))
    before = {f: f.read_bytes() for f in files}
    written = rescore_output(archive)
    assert sorted(written) == files
    assert {f: f.read_bytes() for f in files} == before


def test_finished_cells_are_resumed_not_rerun(archive: Path) -> None:
    result = RunPaths.for_cell(archive, TASK, "probe", "codex").result
    run_id = json.loads(result.read_text())["identity"]["run_id"]
    proc = run_cells(archive, "-k", f"{TASK} and codex", "--tt-harness", "codex")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert json.loads(result.read_text())["identity"]["run_id"] == run_id
    assert "codex probe" in proc.stdout  # the resumed cell is still reported
