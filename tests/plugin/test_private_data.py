"""Planted secrets and truth never leave a cell's ``private/`` (issue 17).

A real session (a subprocess) over a copy of the example pack with a planted secret, which
the build prints so that it reaches the model, the gateway's records and the harness's
own records, and a truth value: ``--tt-record-bodies``, ``--alluredir``, a cell whose
criteria fail, a cell whose apparatus crashes with a traceback (``--showlocals``,
``--tb=long``), a cell whose verifier never ends (stopped at its bound, the session goes
on), all temp files kept inside the test's folder (``TMPDIR``). Every file the
session wrote and its captured stdout/stderr are then grepped: only files under a cell's
``private/`` may hold either value.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_PACK, REPO

pytestmark = pytest.mark.slow

LOOP_PACK = "E1-verifier-loop-001"
#: The faithful harness (passes), a mutant whose criteria fail, and one whose cell crashes.
HARNESSES = "reference,reference+hide_exit_code,reference+drop_stderr"
CRASH = '''

import tracetrial_fixtures.plugin as _plugin

_real_run_cell = _plugin.run_cell


def _crash(cell):
    raise RuntimeError("forced apparatus crash")


def _run_cell(cell, session, services):
    if cell.pack.id == "E1-verifier-loop-001" and cell.harness != "reference":
        import pytest
        pytest.skip("one cell of the looping-verifier pack is enough")
    if cell.harness == "reference+drop_stderr":
        _crash(cell)        # a traceback whose frames show the cell
    return _real_run_cell(cell, session, services)


_plugin.run_cell = _run_cell
'''


def _suite(root: Path, secret: str, truth: str) -> Path:
    tasks = root / "tasks"
    tasks.mkdir()
    shutil.copy(REPO / "tasks" / "test_cells.py", tasks / "test_cells.py")
    (tasks / "conftest.py").write_text((REPO / "tasks" / "conftest.py").read_text() + CRASH)
    pack = tasks / EXAMPLE_PACK.name
    shutil.copytree(EXAMPLE_PACK, pack, ignore=shutil.ignore_patterns("__pycache__"))
    # Quoted, as G5's is: the archived snapshot of task.yaml is redacted to "[REDACTED]".
    with (pack / "task.yaml").open("a") as fh:
        fh.write(f'\nsecrets:\n  - "{secret}"\n')
    build = pack / "workspace" / "build.py"
    # The build prints the secret: the tool result carries it to the model.
    build.write_text(build.read_text().replace("import ", f"print('deploy key {secret}')\nimport ", 1))
    truth_file = pack / "truth.json"
    (truth_file).write_text(json.dumps({**json.loads(truth_file.read_text()), "release_marker": truth}))
    # A second pack whose verifier never ends (bound 3 s): its cell is apparatus_invalid, the
    # session goes on to the other cells and its reports.
    loop = tasks / LOOP_PACK
    shutil.copytree(pack, loop)
    (loop / "task.yaml").write_text((loop / "task.yaml").read_text().replace(EXAMPLE_PACK.name, LOOP_PACK)
                                    + "verifier_timeout_s: 3\n")
    (loop / "verifier" / "score.py").write_text("def score(ctx):\n    while True:\n        pass\n")
    return tasks


def _leaks(root: Path, needles: dict[str, bytes], skip: Path) -> list[str]:
    """Files under ``root`` (but ``skip``) holding a needle, outside every ``private/``."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == skip or skip in here.parents:
            dirnames[:] = []
            continue
        for name in filenames:
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            rel = path.relative_to(root)
            private = "traces" in rel.parts and "private" in rel.parts
            found += [f"{rel}: {what}" for what, needle in needles.items() if needle in data and not private]
    return found


def test_secret_and_truth_stay_in_private(tmp_path: Path) -> None:
    secret = "planted-" + secrets.token_hex(12)   # no key shape: only the value itself can redact it
    truth = "truthmark-" + secrets.token_hex(12)
    tasks = _suite(tmp_path, secret, truth)
    temp = tmp_path / "t"
    temp.mkdir()
    out, allure = tmp_path / "out", tmp_path / "allure"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tasks", "-p", "no:cacheprovider", "-rA", "-l", "--tb=long",
         f"--tt-harness={HARNESSES}", f"--tt-output={out}", "--tt-sandbox=local", "--tt-record-bodies",
         f"--alluredir={allure}"],
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(temp)}, capture_output=True, timeout=900, check=False)
    (tmp_path / "session.stdout").write_bytes(proc.stdout)
    (tmp_path / "session.stderr").write_bytes(proc.stderr)
    text = proc.stdout.decode(errors="replace")
    # The session ran what it should: one pass, the mutant's failures, the forced crash.
    assert "RuntimeError: forced apparatus crash" in text, text[-4000:]
    assert "E1-build-status-001-reference-probe" in text and "H1-exit-status-visible" in text
    cells = out / "traces" / EXAMPLE_PACK.name / "probe"
    assert (cells / "reference" / "artifacts" / "llm_judge" / "combined_score.json").is_file()
    # The values were really there: the secret went to the model, the truth into the snapshot.
    records = [json.loads(line) for line in (cells / "reference" / "gateway" / "requests.jsonl").read_text().splitlines()]
    assert sum(r["planted_secrets"][0] for r in records) >= 1
    scan = json.loads((cells / "reference" / "evidence" / "secret_scan.json").read_text())
    assert scan["found"][0]["files"].get("gateway/requests.jsonl", 0) >= 1
    assert list((cells / "reference" / "gateway" / "bodies").glob("*.json"))
    assert truth in (cells / "reference" / "private" / "task" / EXAMPLE_PACK.name / "truth.json").read_text()
    assert list(allure.glob("*-result.json")) and list((out / ".gateway").rglob("requests.jsonl"))
    # The looping verifier was stopped at its bound; the session went on to its end.
    loop = json.loads((out / "traces" / LOOP_PACK / "probe" / "reference" / "artifacts" / "llm_judge"
                       / "combined_score.json").read_text())
    assert loop["attribution"]["label"] == "apparatus_invalid" and not loop["admitted"]
    assert any("verifier exceeded 3 s" in d["reason"] for d in loop["admission"] if not d["ok"])
    assert "verifier exceeded 3 s" in text and (out / "reports" / "summary.json").is_file()

    leaks = _leaks(tmp_path, {"secret": secret.encode(), "truth": truth.encode()}, skip=tasks)
    assert leaks == [], leaks
