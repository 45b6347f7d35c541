"""A broken pack makes its run ``apparatus_invalid`` with the reason, never a measured run
(issue 17): an unknown rule kind, a ``score.py`` that raises, and one that never ends (its
bound; ``rescore`` does not hang either)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from criteria import score_run
from criteria.rescore import rescore_archive
from criteria.rundata import load_run
from criteria.verifier import DEFAULT_TIMEOUT_S, TIMEOUT_ENV, run_verifier, verifier_timeout
from tests.criteria.archive_factory import RunBuilder, rule_criterion, tool_event
from tracetrial.results import CombinedScore
from tracetrial.task import load_task

HARNESS = [rule_criterion("H1", "trace_event_exists", event_type="tool")]
AGENT = [rule_criterion("A1", "verifier")]
PASSING = "def score(ctx):\n    return {'A1': (True, 'ok')}\n"
RAISES = "def score(ctx):\n    raise ValueError('no such field: deploy_id')\n"
#: Starts a child that would outlive it, records the child's pid, then never returns.
LOOPS = '''
import subprocess, sys

def score(ctx):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (ctx.run_dir.parent / "child.pid").write_text(str(child.pid))
    while True:
        pass
'''


def _run(make_pack: Callable[..., Path], make_run: Callable[..., RunBuilder], score_py: str, *,
         agent: list[dict[str, object]] = AGENT, spec: dict[str, object] | None = None) -> Path:
    pack = make_pack(harness=HARNESS, agent=agent, score_py=score_py, spec=spec)
    run = make_run(pack)
    run.events.append(tool_event("Bash", {"command": "make"}, "ok", exit_code=0))
    run.workspace["out.txt"] = "done"
    return run.build()


def _score(run_dir: Path) -> CombinedScore:
    task_id = next((run_dir / "private" / "task").iterdir()).name
    return score_run(load_task(run_dir / "private" / "task" / task_id), run_dir)


def _failed(score: CombinedScore) -> dict[str, str]:
    return {d.check: d.reason for d in score.admission if not d.ok}


def _gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie waiting for init)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def test_a_sound_pack_is_measured(make_pack, make_run):
    score = _score(_run(make_pack, make_run, PASSING))
    assert score.admitted and score.attribution.label == "clean" and score.combined_pass


def test_an_unknown_rule_kind_makes_the_run_apparatus_invalid(make_pack, make_run):
    agent = [rule_criterion("A1", "file_exist", path="out.txt")]  # a typo of file_exists
    score = _score(_run(make_pack, make_run, PASSING, agent=agent))
    assert not score.admitted and score.attribution.label == "apparatus_invalid"
    reason = _failed(score)["pack_rules"]
    assert "verifier/agent_score.yaml" in reason and "'A1'" in reason and "unknown rule kind" in reason
    assert score.effective_score == 0.0 and not score.clean


def test_a_raising_score_py_makes_the_run_apparatus_invalid(make_pack, make_run):
    run_dir = _run(make_pack, make_run, RAISES)
    score = _score(run_dir)
    assert not score.admitted and score.attribution.label == "apparatus_invalid"
    assert "score.py raised ValueError: no such field: deploy_id" in _failed(score)["verifier"]
    verifier_json = (run_dir / "evidence" / "packets" / "_verifier.json").read_text()
    assert "ValueError: no such field: deploy_id" in verifier_json   # the evidence is archived


def test_a_score_py_that_never_ends_is_stopped_at_its_bound(make_pack, make_run):
    run_dir = _run(make_pack, make_run, LOOPS, spec={"verifier_timeout_s": 2})
    started = time.monotonic()
    score = _score(run_dir)
    assert time.monotonic() - started < 30
    assert not score.admitted and score.attribution.label == "apparatus_invalid"
    assert "verifier exceeded 2 s" in _failed(score)["verifier"]
    # What score.py started went with it (its process group was killed).
    pid = int((run_dir.parent / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def test_rescore_does_not_hang_on_a_score_py_that_never_ends(make_pack, make_run, tmp_path, monkeypatch):
    run_dir = _run(make_pack, make_run, LOOPS)
    monkeypatch.setenv(TIMEOUT_ENV, "2")  # the global bound (the task sets none)
    report = rescore_archive(tmp_path / "out")
    assert [c.outcome for c in report.cells] == ["rescored"]
    score = CombinedScore.model_validate_json((run_dir / "artifacts" / "llm_judge" / "combined_score.json").read_text())
    assert score.attribution.label == "apparatus_invalid" and "verifier exceeded 2 s" in _failed(score)["verifier"]


def test_the_bound_task_then_environment_then_default(make_pack, make_run):
    plain = load_task(make_pack(harness=HARNESS, agent=AGENT, score_py=PASSING))
    assert verifier_timeout(plain, env={}) == DEFAULT_TIMEOUT_S == 60
    assert verifier_timeout(plain, env={TIMEOUT_ENV: "5"}) == 5
    own = load_task(make_pack(harness=HARNESS, agent=AGENT, score_py=PASSING, spec={"verifier_timeout_s": 7}))
    assert verifier_timeout(own, env={TIMEOUT_ENV: "5"}) == 7
    with pytest.raises(ValueError, match=f"{TIMEOUT_ENV}='soon' is not a positive number"):
        verifier_timeout(plain, env={TIMEOUT_ENV: "soon"})


def test_an_unusable_bound_is_the_verifiers_error(make_pack, make_run, monkeypatch):
    run_dir = _run(make_pack, make_run, PASSING)
    monkeypatch.setenv(TIMEOUT_ENV, "-1")
    task_id = next((run_dir / "private" / "task").iterdir()).name
    outcome = run_verifier(load_task(run_dir / "private" / "task" / task_id), load_run(run_dir))
    assert outcome.error == f"{TIMEOUT_ENV}='-1' is not a positive number of seconds"


def test_a_verifier_that_kills_its_own_process(make_pack, make_run):
    score = _score(_run(make_pack, make_run, "import os\n\ndef score(ctx):\n    os._exit(3)\n"))
    assert score.attribution.label == "apparatus_invalid"
    assert "verifier process ended without a result (exit code 3)" in _failed(score)["verifier"]
    assert os.getpid()  # this process is still here


PLANTED = "ttk_live_5d1c0e7a9b"
QUOTES = f"def score(ctx):\n    return {{'A1': (False, 'found {PLANTED} in out.txt')}}\n"
RAISES_QUOTING = f"def score(ctx):\n    raise ValueError('bad token {PLANTED}')\n"


@pytest.mark.parametrize("score_py", [QUOTES, RAISES_QUOTING], ids=["reason", "exception"])
def test_a_planted_secret_quoted_by_the_verifier_never_reaches_the_score(make_pack, make_run, score_py):
    """A verifier's reason or exception text that quotes a planted secret is redacted in
    ``combined_score.json`` and in the score the plugin prints, like every archived file."""
    run_dir = _run(make_pack, make_run, score_py, spec={"secrets": [PLANTED]})
    score = _score(run_dir)
    assert PLANTED not in score.model_dump_json()
    text = (run_dir / "artifacts" / "llm_judge" / "combined_score.json").read_text(encoding="utf-8")
    assert PLANTED not in text and ("found" in text or "bad token" in text)
