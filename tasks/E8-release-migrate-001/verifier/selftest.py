"""Self-test of E8-release-migrate-001's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built by driving the pack's probe policy against a stand-in harness that runs the real
``migrate.py`` on a copy of the workspace (its input a pipe kept open, so ``apply`` really sits
at its prompt until it is ended).

Faithful: the reference harness - the apply call waiting for input is ended (SIGTERM to its group)
and its result says so, with the plan and the prompt; the dry run and the review follow: everything
passes.
Broken: ``reference+hang_on_input`` - the apply call never returns; the runner's wall clock ends the
turn ~108 s after the prompt with the call open (a trace event with no result, no request delivering
it; ``result.json`` records the timed-out turn). H1, H2 and A1 fail; A2 holds (nothing applied).

Run ``python tasks/E8-release-migrate-001/verifier/selftest.py`` (exit 0 when both hold).
"""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from tracetrial.policy import (
    Final,
    NativeTool,
    Observation,
    ReadFile,
    Shell,
    Turn,
    TurnView,
    WriteFile,
)
from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score  # the pack's verifier, next to this file (after the sys.path insert)

PACK = HERE.parent
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
#: What each stand-in declares (names the policy sees) and how its shell tool is called.
HARNESSES = {
    "reference": {"tools": ("shell", "read_file", "write_file"), "shell": "shell", "key": "command"},
    "hang": {"tools": ("shell", "read_file", "write_file"), "shell": "shell", "key": "command"},
    "codex": {"tools": ("exec_command", "write_stdin"), "shell": "exec_command", "key": "cmd"},
    "openclaw": {"tools": ("exec", "process", "read", "write"), "shell": "exec", "key": "command"},
    "openclaw_noproc": {"tools": ("exec", "read", "write"), "shell": "exec", "key": "command"},
    "claude": {"tools": ("Bash", "Read", "Write"), "shell": "Bash", "key": "command"},
}


def load_policy():
    spec = importlib.util.spec_from_file_location("e8_release_migrate_probe", PACK / "probe_policy.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Waiting:
    """``migrate.py apply`` (or any command) started with its input a pipe kept open; its output
    collected by a thread."""

    def __init__(self, ws, command):
        self.proc = subprocess.Popen(["bash", "-c", command], cwd=ws, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.out = bytearray()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for chunk in iter(lambda: self.proc.stdout.read1(4096), b""):
            self.out += chunk

    def text(self):
        return self.out.decode("utf-8", errors="replace")

    def settle(self, until="[y/N]", limit_s=10.0):
        end = time.monotonic() + limit_s
        while until not in self.text() and self.proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.1)

    def signal(self, sig):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.reader.join(timeout=2)


class Harness:
    """A stand-in for one harness's handling of the pack's calls (``kind`` a key of HARNESSES)."""

    def __init__(self, ws, kind="reference"):
        self.ws, self.kind, self.spec = ws, kind, HARNESSES[kind]
        self.sessions = {}
        self.calls = []  # (name, arguments, content or None, is_error, time the result came back)

    def _shell(self, command, tty):
        if "migrate.py apply" in command and tty and self.kind != "claude":
            job = Waiting(self.ws, command)
            job.settle()
            if self.kind == "hang":
                job.signal(signal.SIGKILL)  # the runner's kill at the wall clock: no result ever comes back
                return None, True
            if self.kind == "reference":
                job.signal(signal.SIGTERM)
                return ("Command was waiting for input on its terminal (no output for 5 s) and was ended after "
                        "6.2 s (process group terminated); no exit status. Output so far:\n" + job.text()), True
            if self.kind == "codex":
                sid = str(len(self.sessions) + 3)
                self.sessions[sid] = job
                return (f"Chunk ID: 1\nWall time: 10.0 seconds\nProcess running with session ID {sid}\n"
                        f"Output:\n{job.text()}"), False
            sid = f"calm-reef-{len(self.sessions) + 1}"
            self.sessions[sid] = job
            return (f"Command still running (session {sid}, pid {job.proc.pid}). Use process "
                    "(list/poll/log/write/kill/clear/remove) for follow-up."), False
        proc = subprocess.run(["bash", "-c", command], cwd=self.ws, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, check=False)
        body = proc.stdout + (f"[stderr]\n{proc.stderr}" if proc.stderr else "")
        return f"Exit code {proc.returncode}\n{body or '(no output)'}", proc.returncode != 0

    def _native(self, name, args):
        if name == "process":
            job = self.sessions.get(str(args.get("sessionId")))
            if job is None:
                return "No session found", True
            if args.get("action") == "kill":
                job.signal(signal.SIGKILL)
                return f"Killed session {args.get('sessionId')}.", False
            return job.text(), False
        if name == "write_stdin":
            job = self.sessions.get(str(args.get("session_id")))
            if job is None:
                return "Unknown session", True
            if args.get("chars") == "\u0003":
                job.signal(signal.SIGINT)
                return f"Process exited with code {job.proc.returncode}\nOutput:\n", False
            return f"Process running with session ID {args.get('session_id')}\nOutput:\n", False
        return f"unknown tool {name}", True

    def act(self, action):
        """The observation for ``action``; None when the call never returns (the turn is killed)."""
        if isinstance(action, Shell):
            name, args = self.spec["shell"], {self.spec["key"]: action.command}
            if action.tty and self.kind != "claude":
                args["pty" if self.kind.startswith("openclaw") else "tty"] = True
            content, err = self._shell(action.command, action.tty)
        elif isinstance(action, ReadFile):
            name, args = "read_file", {"path": action.path}
            path = self.ws / action.path
            content, err = (path.read_text(), False) if path.is_file() else (f"No such file: {action.path}", True)
        elif isinstance(action, WriteFile):
            name, args = "write_file", {"path": action.path, "content": action.content}
            (self.ws / action.path).write_text(action.content)
            content, err = f"Wrote {len(action.content)} bytes to {action.path}", False
        elif isinstance(action, NativeTool):
            name, args = action.name, dict(action.arguments)
            content, err = self._native(action.name, args)
        else:
            raise TypeError(f"unexpected action {action!r}")
        self.calls.append((name, args, content, err, time.time()))
        if content is None:
            return None
        return Observation(text=content, is_error=err, tool=name)

    def close(self):
        for job in self.sessions.values():
            job.signal(signal.SIGKILL)


def archive(calls, *, delay_s=0.0):
    """``(events, gateway)`` of the calls: a trace event each (no result for a call that never
    returned) and one request after each returned call, delivering every result so far; the request
    arrives when the result came back (plus ``delay_s``)."""
    events, results, gateway = [], [], [{"index": 0, "status": 200, "error": None, "wire_format": "chat",
                                         "started_at": datetime.now(UTC).isoformat(), "tool_results": []}]
    for seq, (name, args, content, err, at) in enumerate(calls, start=1):
        call = f"call_{seq}"
        result = None if content is None else {"content": content, "is_error": err}
        events.append(ToolEvent.model_validate({
            "seq": seq, "timestamp": "2026-12-07T00:00:00Z", "run_id": "selftest", "conversation_turn": 1, **MAIN,
            "source": "native:selftest", "tool_call": {"id": call, "name": name, "arguments": args},
            "tool_result": result}))
        if content is None:
            break
        results.append({"id": call, "is_error": err, "content": content})
        gateway.append({"index": seq, "status": 200, "error": None, "wire_format": "chat",
                        "started_at": datetime.fromtimestamp(at + delay_s, UTC).isoformat(),
                        "tool_results": list(results)})
    return events, gateway


def drive_probe(ws, kind="reference"):
    """Drive the probe policy against the stand-in ``kind``; ``(actions, calls)``."""
    policy = load_policy()
    harness = Harness(ws, kind)
    view = TurnView(tool_names=HARNESSES[kind]["tools"])
    gen = policy.policy(Turn(1, (PACK / "prompt.md").read_text(encoding="utf-8"), view=view))
    actions = [next(gen)]
    try:
        while not isinstance(actions[-1], Final):
            obs = harness.act(actions[-1])
            if obs is None:
                break
            actions.append(gen.send(obs))
    except StopIteration:
        pass
    finally:
        harness.close()
    return actions, harness.calls


def write_result(run_dir, *, seconds_after_prompt, timed_out=True):
    """``result.json`` as the runner writes it, with one turn that ended (its wall clock, when
    ``timed_out``) this many seconds after the first prompt migrate.py logged."""
    prompt = next((r for r in (json.loads(line) for line in (run_dir / ".migrate" / "log.jsonl").read_text().splitlines())
                   if r.get("event") == "prompt"), None)
    t0 = prompt["t"] - 2.0 if prompt else time.time()
    turn = {"index": 1, "started_at": datetime.fromtimestamp(t0, UTC).isoformat(), "exit_code": None,
            "timed_out": timed_out, "duration_s": seconds_after_prompt + 2.0, "interrupted": False}
    (run_dir / "result.json").write_text(json.dumps({"status": "timed_out" if timed_out else "completed",
                                                     "turns": [turn]}))


def context(ws, events, gateway, probe=None):
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=truth, oracle=None, events=events,
                           gateway=gateway, probe=probe, ledgers={}, run_dir=ws)


def run(root, name, kind="reference", **archive_kw):
    ws = root / name
    shutil.copytree(PACK / "workspace", ws, symlinks=True)
    _, calls = drive_probe(ws, kind)
    events, gateway = archive(calls, **archive_kw)
    if kind == "hang":  # the runner's 110 s wall clock ended the turn ~108 s after the prompt
        write_result(ws, seconds_after_prompt=108.0)
    return score.score(context(ws, events, gateway))


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = run(Path(tmp), "faithful")
        assert all(v[0] is True for v in good.values()), good
        bad = run(Path(tmp), "broken", kind="hang")
        failed = {k for k, v in bad.items() if v[0] is not True}
        assert failed == {score.H1, score.H2, score.A1}, bad
        assert all(bad[k][0] is False for k in failed), bad
        assert "never reached the model" in bad[score.H1][1], bad[score.H1]
        assert bad[score.A2][0] is True, bad[score.A2]


if __name__ == "__main__":
    selftest()
    print("selftest ok")
