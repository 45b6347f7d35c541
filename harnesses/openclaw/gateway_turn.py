"""One OpenClaw turn through its own Gateway (the turn's process; runs inside the cell's sandbox).

OpenClaw's sub-agents (``sessions_spawn``) are Gateway work: in the embedded ``agent exec`` /
``agent --local`` paths the spawn is refused with ``published reply runtime missing for main``
(OpenClaw 2026.9.6 publishes the reply-dispatch runtime only under a Gateway lifecycle). So a
task that delegates runs each turn the way an OpenClaw user does: the Gateway daemon on a
loopback port of the run and a Gateway-backed ``openclaw agent --session-id <id>`` turn::

    python3 gateway_turn.py --openclaw <bin> --port <p> --gateway-log <file> --state <dir>
                            --deadline <s> -- openclaw agent --session-id <id> --json --message-file <f>

1. ``openclaw gateway run --port <p> --bind loopback --auth token`` (token from
   ``OPENCLAW_GATEWAY_TOKEN``), its output appended to ``--gateway-log`` (a native record);
2. once it logs ``http server listening``, the agent turn with ``--timeout`` set to what is left;
   its stdout (the Gateway-backed JSON result) is this process's stdout, its exit status ours;
3. the Gateway keeps running while the run's sub-agents work and announce (OpenClaw's own
   record of that work, ``<state>/state/openclaw.sqlite`` and the session store — SQLite, or the
   2026.6.x trajectory files ``agents/*/sessions/*.trajectory.jsonl`` — read-only):
   it is stopped once no task run is queued or running, no sub-agent completion awaits
   delivery and every runtime run has ended — unchanged for ``QUIET_S`` — or at the deadline
   (then, if the agent turn itself had succeeded, the exit status is OpenClaw's timeout status 2
   and stderr says the run's sub-agent work was cut off);
4. SIGTERM to the Gateway, SIGKILL after a grace.

The user's answers (``--ask-command``, tasks with ``ask_user``): OpenClaw's ``ask_user`` tool
(deferred behind Tool Search) registers its questions with the Gateway (``question.request``) and
waits for the Gateway to resolve them (``question.waitAnswer``); the user answers from the Control
UI or a chat channel, which call ``question.resolve``. A headless run has no such client, so while
the agent turn runs this process is that client (:class:`Answerer`): every ``ASK_POLL_S`` it asks
the Gateway for pending questions with OpenClaw's own CLI::

    openclaw gateway call question.list --url ws://127.0.0.1:<p> --token <t> --json --params '{}'

puts each question of a pending request to ``--ask-command`` (a host command: JSON
``{question, options, call_id, …}`` on stdin, the user's answer text on stdout) and resolves the
request with the answers, one per question, keyed by its ``questionId``::

    openclaw gateway call question.resolve … --params '{"id": <id>, "answers": {"answers": {<qid>: [<text>]}}}'

An answer is passed as it is: an option's label when the user picked one (the Gateway keeps the
label), else the user's own words, which the Gateway accepts for a question with ``isOther``
(``ask_user`` marks every question so). Each request is put to the user once; one the command
could not answer stays pending, and OpenClaw's own timeout tells the model no answer arrived.

Standard library only: it runs under the sandbox's Python.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

READY = "http server listening"
POLL_S = 0.5
#: Time kept at the end of the deadline for stopping the Gateway.
STOP_RESERVE_S = 12.0
STOP_GRACE_S = 8.0
ACTIVE_TASK = ("queued", "running")
#: How long the records must stay idle and unchanged before the Gateway is stopped (a finished
#: child's announcement starts the parent's follow-up run a moment after the delivery).
QUIET_S = 3.0
#: OpenClaw's own exit status for a turn that hit its timeout.
TIMEOUT_EXIT = 2
#: The stderr line of a turn whose sub-agent work the deadline cut off (the adapter reads it
#: back: such a turn exceeded the wall clock, it is a timed-out turn, never a finished one).
CUT_OFF = ("openclaw gateway stopped at the turn's deadline while the run's sub-agent work was still "
           "queued, running or awaiting delivery")
#: The Gateway token's variable (the adapter sets it; ``gateway call`` with ``--url`` needs it given).
TOKEN_VAR = "OPENCLAW_GATEWAY_TOKEN"
#: Pause between two ``question.list`` calls (each call starts Node: 1-5 s on its own).
ASK_POLL_S = 2.0
#: Longest wait for one ``gateway call`` / one answer of the ask command.
ASK_CALL_TIMEOUT_S = 60.0
#: The answerer's lines on stderr start with this (ids and statuses only, never an answer).
ASK_LOG = "tt-ask-user:"


def _log_has(path: Path, needle: str) -> bool:
    try:
        return needle in path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _query(db: Path, sql: str) -> list[tuple[Any, ...]] | None:
    if not db.is_file():
        return []
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2)
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return None  # busy or mid-write: unknown, not idle


def _trajectory_lines(path: Path) -> list[tuple[Any, ...]] | None:
    """(run id, type) of each record of a 2026.6.x trajectory file; ``None`` while its last line
    is still being written (unknown, not idle). Another line that is not JSON is skipped: it
    will not change, so it must not keep the Gateway up until the deadline."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    out: list[tuple[Any, ...]] = []
    lines = text.splitlines()
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if no == len(lines) and not text.endswith("\n"):
                return None
            continue
        if isinstance(record, dict) and isinstance(record.get("runId"), str):
            out.append((record["runId"], record.get("type")))
    return out


def busy(state: Path) -> tuple[bool, tuple[Any, ...]]:
    """Whether OpenClaw still has work of this run, and a fingerprint of its records."""
    shared = state / "state" / "openclaw.sqlite"
    tasks = _query(shared, "select runtime, status, delivery_status from task_runs")
    runs: list[tuple[Any, ...]] = []
    for db in sorted(state.glob("agents/*/agent/openclaw-agent.sqlite")):
        got = _query(db, "select run_id, json_extract(event_json, '$.type') from trajectory_runtime_events "
                         "where event_json is not null")
        if got is None:
            return True, ()
        runs += got
    for path in sorted(state.glob("agents/*/sessions/*.trajectory.jsonl")):
        got = _trajectory_lines(path)
        if got is None:
            return True, ()
        runs += got
    if tasks is None:
        return True, ()
    active = any(status in ACTIVE_TASK for _, status, _ in tasks)
    undelivered = any(runtime == "subagent" and delivery == "pending" for runtime, _, delivery in tasks)
    ended = {rid for rid, kind in runs if kind == "session.ended"}
    open_runs = {rid for rid, _ in runs} - ended
    return active or undelivered or bool(open_runs), (len(tasks), len(runs), tuple(sorted(map(str, tasks))))


# ------------------------------------------------------------------ the user's answers


def pending_requests(listing: Any) -> list[dict[str, Any]]:
    """The pending question requests of a ``question.list`` result (``{questions: [{id,
    questions: [...], status}]}``) that carry at least one question."""
    items = listing.get("questions") if isinstance(listing, dict) else None
    return [r for r in items if isinstance(r, dict) and isinstance(r.get("id"), str) and r.get("status") == "pending"
            and isinstance(r.get("questions"), list) and r["questions"]] if isinstance(items, list) else []


def _labels(question: dict[str, Any]) -> list[str] | None:
    options = question.get("options")
    labels = [str(o.get("label", "")) if isinstance(o, dict) else str(o) for o in options] \
        if isinstance(options, list) else []
    return [label for label in labels if label] or None


def ask_requests(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(questionId, request for the ask command)`` per question of a pending request: the
    question text, the option labels (``None`` for none), a call id naming the Gateway request and
    the question, and the question as the Gateway holds it (``native``, for the user's ledger)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for q in record.get("questions") or []:
        if not isinstance(q, dict) or not isinstance(q.get("questionId"), str):
            continue
        out.append((q["questionId"], {
            "question": str(q.get("question", "")), "options": _labels(q),
            "call_id": f"{record['id']}/{q['questionId']}", "header": q.get("header"),
            "native": {"gateway_question_id": record["id"], **q}}))
    return out


def resolve_params(record_id: str, answers: dict[str, str]) -> dict[str, Any]:
    """``question.resolve`` parameters: each question's answer text as its one answer value
    (a picked option's label, or the user's own words for an ``isOther`` question)."""
    return {"id": record_id, "answers": {"answers": {qid: [text] for qid, text in answers.items()}}}


def _log(text: str) -> None:
    print(f"{ASK_LOG} {text}", file=sys.stderr, flush=True)


class Answerer(threading.Thread):
    """Relays the Gateway's pending questions to the user (``ask``) while the agent turn runs."""

    def __init__(self, openclaw: str, port: str, token: str, ask: Callable[[dict[str, Any]], str | None]):
        super().__init__(name="tt-ask-user", daemon=True)
        self.openclaw, self.port, self.token, self.ask = openclaw, port, token, ask
        self.done = threading.Event()
        self.handled: set[str] = set()

    def call(self, method: str, params: dict[str, Any]) -> Any:
        """One ``openclaw gateway call``; its JSON result, or ``None`` (failure logged)."""
        argv = [self.openclaw, "gateway", "call", method, "--url", f"ws://127.0.0.1:{self.port}",
                "--token", self.token, "--json", "--params", json.dumps(params)]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=ASK_CALL_TIMEOUT_S,
                                 stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _log(f"gateway call {method} failed: {exc.__class__.__name__}")
            return None
        if out.returncode != 0:
            _log(f"gateway call {method} exited {out.returncode}: {(out.stderr or out.stdout).strip()[-300:]}")
            return None
        try:
            return json.loads(out.stdout)
        except ValueError:
            _log(f"gateway call {method} gave no JSON: {out.stdout.strip()[:200]}")
            return None

    def answer(self, record: dict[str, Any]) -> None:
        """Put each question of one pending request to the user once, then resolve it."""
        self.handled.add(record["id"])
        answers: dict[str, str] = {}
        for qid, request in ask_requests(record):
            text = self.ask(request)
            if text is None:
                _log(f"question {record['id']}: the user gave no answer to {qid!r}; left pending")
                return
            answers[qid] = text
        result = self.call("question.resolve", resolve_params(record["id"], answers))
        status = result.get("status") if isinstance(result, dict) else None
        _log(f"question {record['id']}: {len(answers)} answer(s) sent, status {status}")

    def run(self) -> None:
        while not self.done.is_set():
            listing = self.call("question.list", {})
            for record in pending_requests(listing):
                if record["id"] not in self.handled and not self.done.is_set():
                    self.answer(record)
            self.done.wait(ASK_POLL_S)


def command_answer(command: list[str]) -> Callable[[dict[str, Any]], str | None]:
    """The user's answer through ``command`` (the request as JSON on stdin, the answer on stdout;
    ``None`` when it fails)."""

    def ask(request: dict[str, Any]) -> str | None:
        try:
            out = subprocess.run(command, input=json.dumps(request), capture_output=True, text=True,
                                 timeout=ASK_CALL_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _log(f"ask command failed: {exc.__class__.__name__}")
            return None
        if out.returncode != 0:
            _log(f"ask command exited {out.returncode}: {out.stderr.strip()[-300:]}")
            return None
        return out.stdout.strip()

    return ask


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main(argv: list[str]) -> int:
    started = time.monotonic()
    p = argparse.ArgumentParser()
    p.add_argument("--openclaw", required=True)
    p.add_argument("--port", required=True)
    p.add_argument("--gateway-log", required=True, type=Path)
    p.add_argument("--state", required=True, type=Path)
    p.add_argument("--deadline", required=True, type=float)
    p.add_argument("--ask-command", help="the user's answers: a command (JSON request on stdin, answer on stdout)")
    p.add_argument("agent", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    agent = args.agent[1:] if args.agent[:1] == ["--"] else args.agent
    deadline = started + args.deadline
    args.gateway_log.parent.mkdir(parents=True, exist_ok=True)
    with args.gateway_log.open("ab") as log:
        gateway = subprocess.Popen([args.openclaw, "gateway", "run", "--port", str(args.port), "--bind", "loopback",
                                    "--auth", "token"], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        while not _log_has(args.gateway_log, READY):
            if gateway.poll() is not None:
                print(f"openclaw gateway exited with {gateway.returncode} before it was ready "
                      f"(see {args.gateway_log.name})", file=sys.stderr)
                return 1
            if time.monotonic() > deadline - STOP_RESERVE_S - 5:
                print("openclaw gateway was not ready before the turn's deadline", file=sys.stderr)
                return 2
            time.sleep(POLL_S)
        own = max(1, int(deadline - time.monotonic() - STOP_RESERVE_S))
        sys.stdout.flush()
        answerer = None
        if args.ask_command:
            answerer = Answerer(args.openclaw, str(args.port), os.environ.get(TOKEN_VAR, ""),
                                command_answer(shlex.split(args.ask_command)))
        turn = subprocess.Popen([*agent, "--timeout", str(own)], stdin=subprocess.DEVNULL)
        if answerer is not None:
            answerer.start()
        try:
            code = turn.wait()
        finally:
            if answerer is not None:
                # a call in flight ends on its own (a daemon thread: never past the deadline)
                answerer.done.set()
                answerer.join(max(0.0, min(ASK_CALL_TIMEOUT_S, deadline - time.monotonic() - STOP_RESERVE_S)))
        last: tuple[Any, ...] | None = None
        quiet_since = time.monotonic()
        settled = False
        while time.monotonic() < deadline - STOP_RESERVE_S and gateway.poll() is None:
            working, mark = busy(args.state)
            now = time.monotonic()
            if working or mark != last:
                quiet_since = now
            elif now - quiet_since >= QUIET_S:
                settled = True
                break
            last = None if working else mark
            time.sleep(POLL_S)
        if not settled and gateway.poll() is None and code == 0:
            # the turn's own run ended but its sub-agents / announce runs were cut off: say so, with
            # OpenClaw's timeout status, instead of passing the work off as a clean turn
            print(CUT_OFF, file=sys.stderr)
            return TIMEOUT_EXIT
        return code
    finally:
        stop(gateway)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main(sys.argv[1:]))
