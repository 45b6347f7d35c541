"""Self-test of ``score.py`` (TASK_GUIDE rule 13): one faithful and several broken evidence sets.

Run from the repository root: ``python tasks/O5-quarter-close-002/verifier/selftest.py`` (exit 0
when every verdict is as expected). ``build`` is also what ``tests/tasks/test_o5_quarter_close_002.py``
builds its evidence with.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tracetrial.verify import ToolEvent, VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TASK_ID = "O5-quarter-close-002"
KEY = "00112233445566778899aabbccddeeff"
T0 = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)
#: The run's answered requests in arrival order: (principal, input, output). The parent pulls and
#: spawns; the helper checks and answers; the parent reads, writes and answers.
CALLS = [("main", 1200, 30), ("main", 1500, 25), ("helper", 600, 20), ("helper", 780, 12),
         ("main", 1800, 20), ("main", 2100, 40), ("main", 2300, 15)]
SPAWN_ID, CHILD_SHELL_ID = "call_spawn_1", "call_child_1"


def _load(path: Path, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    return mod


SCORE = _load(HERE / "score.py", "o5q_selftest_score")


def total(who: str | None = None) -> tuple[int, int]:
    return (sum(i for p, i, _ in CALLS if who in (None, p)), sum(o for p, _, o in CALLS if who in (None, p)))


def usage(tin: int, tout: int, cached: int | None = None) -> dict[str, Any]:
    return {"prompt_tokens": tin, "completion_tokens": tout, "total_tokens": tin + tout, "cached_tokens": cached,
            "reasoning_tokens": None, "responses_with_usage": len(CALLS), "responses_without_usage": 0}


def checked_line(key: str = KEY) -> str:
    dec = SCORE.truth(PACK / "workspace", key)["months"]["2026-12"]
    return f"checked 2026-12: revenue={dec['revenue']} costs={dec['costs']} (8 postings accepted)"


def close_json(key: str = KEY) -> dict[str, Any]:
    want = SCORE.truth(PACK / "workspace", key)
    return {"quarter": "2026-Q4", **want}


def gateway(spawn_result: str | None = None, cache: int = 0, refused: bool = False) -> list[dict[str, Any]]:
    """The gateway's records: the parent's request after the spawn carries the spawn result."""
    prompt = (PACK / "prompt.md").read_text(encoding="utf-8")
    helper_prompt = "You are the ledger-check helper. In the current folder run `python3 books.py check ..."
    reqs: list[dict[str, Any]] = []
    if refused:
        reqs.append({"index": 0, "status": 529, "error": "overloaded", "usage": None, "tool_results": [],
                     "started_at": T0.isoformat(), "last_user_text": prompt})
    for n, (who, tin, tout) in enumerate(CALLS):
        results: list[dict[str, Any]] = []
        if n == 3:
            results = [{"id": CHILD_SHELL_ID, "is_error": False, "content": "check 2026-12: 10 postings read\n"
                        + checked_line()}]
        if n == 4:
            results = [{"id": SPAWN_ID, "is_error": False,
                        "content": checked_line() if spawn_result is None else spawn_result}]
        reqs.append({"index": len(reqs), "status": 200, "error": None, "tool_results": results,
                     "started_at": (T0 + timedelta(seconds=1 + n)).isoformat(),
                     "last_user_text": helper_prompt if who == "helper" else prompt,
                     "usage": {"input_tokens": tin, "output_tokens": tout, "cache_read_tokens": cache or None,
                               "cache_write_tokens": None, "reasoning_tokens": None}})
    return reqs


def tool_events() -> list[Any]:
    def ev(seq: int, cid: str, name: str, args: dict[str, Any], content: str, **kw: Any) -> ToolEvent:
        # a real Trace IR tool event (``ctx.tool_events`` keeps only those), built through the pack API
        return ToolEvent.model_validate({
            "seq": seq, "timestamp": T0 + timedelta(seconds=seq), "run_id": "r", "source": "native:test",
            "conversation_turn": 1, "tool_call": {"id": cid, "name": name, "arguments": args},
            "tool_result": {"content": content, "exit_code": 0}, **kw})

    main = {"principal_id": "main", "principal_role": "main"}
    child = {"principal_id": SPAWN_ID, "principal_role": "child", "parent_principal_id": "main"}
    return [ev(2, "call_1", "shell", {"command": "python3 books.py pull"}, "pulled", **main),
            ev(3, SPAWN_ID, "spawn_subagent", {"description": "check", "prompt": "You are the ledger-check helper."},
               checked_line(), **main),
            ev(4, CHILD_SHELL_ID, "shell", {"command": "python3 books.py check ledgers/2026-12.csv"},
               checked_line(), **child),
            ev(5, "call_3", "shell", {"command": "cat ledgers/2026-10.csv ledgers/2026-11.csv"}, "rows", **main),
            ev(6, "call_4", "write_file", {"path": "close.json", "content": "{}"}, "ok", **main)]


def runner_events() -> list[Any]:
    prompt = (PACK / "prompt.md").read_text(encoding="utf-8")
    runner = {"run_id": "r", "source": "runner", "conversation_turn": 1, "principal_id": None,
              "principal_role": None, "child_principal_id": None, "raw_event": None}
    return [SimpleNamespace(event_type="conversation_turn_started", seq=1, timestamp=T0, user_text=prompt, **runner),
            SimpleNamespace(event_type="conversation_turn_finished", seq=99, timestamp=T0 + timedelta(seconds=40),
                            exit_code=0, status="ok", **runner)]


def completion(stated: Any, tool_calls: int | None = 5) -> SimpleNamespace:
    content: dict[str, Any] = {"status": "completed", "model_calls": len(CALLS)}
    if tool_calls is not None:
        content["tool_calls"] = tool_calls
    if stated != "absent":
        content["usage"] = stated
    return SimpleNamespace(event_type="task_completion", seq=90, timestamp=T0 + timedelta(seconds=39), run_id="r",
                           source="native:reference/events.jsonl", conversation_turn=1, principal_id="main",
                           principal_role="main", child_principal_id=None, raw_event=None, status="completed",
                           content=content)


def probe_report() -> dict[str, Any]:
    return {"requests": [{"index": n + 1, "principal": "main" if who == "main" else "helper-1",
                          "kind": "main" if who == "main" else "subagent",
                          "action": "spawn_subagent" if n == 1 else "shell",
                          "call_id": SPAWN_ID if n == 1 else (CHILD_SHELL_ID if n == 2 else None)}
                         for n, (who, _, _) in enumerate(CALLS)]}


def build(root: Path, *, events: list[Any] | None = None, stated: Any = None, close: Any = "truth",
          gw: list[dict[str, Any]] | None = None, key: str | None = KEY, probe: bool = True,
          timed_out: bool = False) -> VerifierContext:
    """A run archive under ``root``; ``stated`` = the completion record's usage (default: the truth)."""
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if key is not None:
        (ws / ".books").mkdir()
        (ws / ".books" / "quarter.key").write_text(key + "\n")
    if close is not None:
        (ws / "close.json").write_text(json.dumps(close_json(key or KEY) if close == "truth" else close))
    snap = root / "private" / "task" / TASK_ID
    snap.mkdir(parents=True)
    shutil.copy(PACK / "prompt.md", snap / "prompt.md")
    (root / "result.json").write_text(json.dumps({"schema": "tt-result/1", "turns": [
        {"index": 1, "started_at": T0.isoformat(), "duration_s": 40.0, "timed_out": timed_out}]}))
    if events is None:
        events = [*runner_events(), *tool_events(), completion(usage(*total()) if stated is None else stated)]
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=probe_report() if probe else None,
                           ledgers={}, run_dir=root)


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, v in SCORE.score(ctx).items() if v is not None and not v[0]}


def main() -> int:
    raw = SCORE.generator(PACK / "workspace")
    dec_raw = raw.totals(raw.postings(KEY, "2026-12"))
    wrong_dec = close_json()
    wrong_dec["months"]["2026-12"] = dec_raw
    cases: list[tuple[str, dict[str, Any], set[str]]] = [
        ("faithful", {}, set()),
        ("last response's usage stated", {"stated": usage(*CALLS[-1][1:])}, {"H1-turn-usage-matches-gateway"}),
        ("the main agent's requests alone", {"stated": usage(*total("main"))}, {"H1-turn-usage-matches-gateway"}),
        ("usage not reported", {"stated": "absent"}, {"H1-turn-usage-matches-gateway"}),
        ("helper answer lost on its way to the parent", {"gw": gateway(spawn_result="(no output)"), "close": None},
         {"H2-check-result-reaches-parent", "A1-december-as-checked", "A2-quarter-totals"}),
        ("raw December summed", {"close": wrong_dec}, {"A1-december-as-checked", "A2-quarter-totals"}),
    ]
    bad = 0
    for name, kw, want in cases:
        with tempfile.TemporaryDirectory() as tmp:
            got = failed(build(Path(tmp), **kw))
        ok = got == want
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: failed {sorted(got)} (expected {sorted(want)})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
