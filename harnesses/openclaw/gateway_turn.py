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

Standard library only: it runs under the sandbox's Python.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
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
        code = subprocess.call([*agent, "--timeout", str(own)], stdin=subprocess.DEVNULL)
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
