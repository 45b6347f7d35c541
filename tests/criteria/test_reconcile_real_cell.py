"""Dual-source reconciliation on a real probe cell of the faithful ``reference`` harness.

One real cell (``C1-bank-statement-002``: an MCP result, shell results and a 313 KB file read the
harness truncates with a notice, so the recorder caps its copy) is run once. The faithful harness's
native record must agree with the provider boundary on every result (zero divergences), the cell
flow must have sealed the evidence with its counts, and a copy whose native record is altered to
misstate the omitted size must be flagged by the rule kind.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from criteria.reconcile import RECONCILIATION_FILE
from criteria.registry import RuleContext, evaluate_rule
from criteria.rules_reconcile import reconciliation_of
from criteria.rundata import load_run
from harnesses.rederive import rederive
from tests.conftest import REPO
from tracetrial.archive import check_seal
from tracetrial.rubric import RuleSpec
from tracetrial.task import load_task
from tracetrial.trace_io import write_events

TASK = "C1-bank-statement-002"


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reconcile")
    cmd = [sys.executable, "-m", "pytest", str(REPO / "tasks"), "-p", "no:cacheprovider", "-q",
           f"--tt-output={out}", "-k", TASK, "--tt-harness", "reference"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-2000:]
    runs = sorted(out.glob(f"traces/{TASK}/*/reference"))
    assert runs, proc.stdout[-3000:]
    return runs[0]


def _rule(run_dir: Path, **params: object) -> tuple[bool | None, str]:
    task = load_task(run_dir / "private" / "task" / TASK)
    out = evaluate_rule(RuleSpec(kind="native_record_accurate", **params), "H9", RuleContext(task=task, run=load_run(run_dir)))
    return out.passed, out.reason


def test_the_faithful_harness_has_zero_divergences(cell: Path) -> None:
    assert check_seal(cell).state == "sealed"
    stored = json.loads((cell / RECONCILIATION_FILE).read_text(encoding="utf-8"))
    counts = stored["counts"]
    assert stored["available"] is True
    assert counts["divergences"] == 0, stored["divergences"]
    assert counts["tool_results_native"] == counts["tool_results_delivered"] == counts["same_delivery"] >= 4
    assert stored["inventory"]["compared"] is True  # the reference harness records its declarations
    usage = stored["usage"]
    assert usage["fields"]["input_tokens"] == usage["fields"]["output_tokens"] == usage["fields"]["requests"] == "agree"
    read = next(r for r in stored["results"] if r["tool"] == "read_file")
    assert read["notice"] == "agree" and read["match"] == "exact"  # capped by the recorder, equal by digest
    summary = json.loads((cell / "summary.json").read_text(encoding="utf-8"))
    assert summary["reconciliation"] == counts
    assert reconciliation_of(load_run(cell)).to_json() == stored  # re-derivable from the archive alone
    passed, reason = _rule(cell)
    assert passed is True, reason


def test_a_native_record_altered_to_misstate_the_omitted_size_is_flagged(cell: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run"
    shutil.copytree(cell, copy)
    log = copy / "native" / "reference-events.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    altered = 0
    for i, line in enumerate(lines):
        if '"tool_result"' in line and "58370 bytes omitted" in line:
            lines[i] = line.replace("58370 bytes omitted", "48370 bytes omitted")
            altered += 1
    assert altered == 1
    log.write_text("".join(lines), encoding="utf-8")
    write_events(copy / "events.json", rederive(copy))  # the trace as the normalizer reads the altered log
    passed, reason = _rule(copy)
    assert passed is False
    assert "notice_mismatch" in reason and "read_file" in reason and "48370" in reason and "58370" in reason
    assert _rule(copy, kinds=["error_flag_mismatch"])[0] is True
