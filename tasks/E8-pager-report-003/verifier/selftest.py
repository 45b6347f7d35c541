"""Self-test of E8-pager-report-003's verifier (TASK_GUIDE rule 13): a faithful and a broken evidence
set, made by driving the pack's probe policy against a stand-in harness that runs the real
``payroll_report.py`` on a copy of the workspace - on a real pseudo-terminal that is the command's
controlling terminal, so the pager really displays its cover, switches the terminal to cbreak mode
and sits blocked reading one key.

Faithful: the reference harness - the pager blocked on its key read is ended (SIGTERM to its group)
and the result says it was waiting for input, with what the terminal showed (the cover page and the
``--More--`` prompt); the summary and signoff.json follow: every criterion passes.
Broken: ``reference+hang_on_input`` - the view call never returns; the pager sits at its prompt until
the runner's kill at the wall clock, ~100 s after the prompt (a trace event without a result, no request
delivering it, ``result.json`` recording the timed-out turn, the pager's ``ended`` logged after the turn's
only model request). Every criterion fails.

The stand-ins (``HARNESSES``) are also what the pack's unit tests drive: Codex's session result and
its Ctrl-C through ``write_stdin``, OpenClaw's "still running" result read through ``process log``
and its no-PTY fallback, Claude Code without a terminal.

Run ``python tasks/E8-pager-report-003/verifier/selftest.py`` (exit 0 when both hold).
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

from tracetrial.policy import Final, NativeTool, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score  # the pack's verifier, next to this file (after the sys.path insert)

PACK = HERE.parent
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
#: Each stand-in: the tools it declares, its shell tool, the command key, the terminal option (None:
#: none) and whether a terminal request really gets one.
HARNESSES = {
    "reference": {"tools": ("shell", "write_file"), "shell": "shell", "key": "command", "tty": "tty", "pty": True},
    "hang": {"tools": ("shell", "write_file"), "shell": "shell", "key": "command", "tty": "tty", "pty": True},
    "codex": {"tools": ("exec_command", "write_stdin", "apply_patch"), "shell": "exec_command", "key": "cmd",
              "tty": "tty", "pty": True},
    "openclaw": {"tools": ("exec", "process", "read", "write"), "shell": "exec", "key": "command", "tty": "pty",
                 "pty": True},
    "openclaw_nopty": {"tools": ("exec", "process", "read", "write"), "shell": "exec", "key": "command",
                       "tty": "pty", "pty": False},
    "claude": {"tools": ("Bash", "Read", "Write"), "shell": "Bash", "key": "command", "tty": None, "pty": False},
}
#: OpenClaw's ``exec {pty}`` under ``agent exec --timeout`` (observed in the E8 siblings): the PTY
#: refused, the command retried without one.
OPENCLAW_FALLBACK = ("Warning: PTY spawn failed (Error: PTY is unavailable when execution requires process-tree "
                     "cleanup); retrying without PTY for `{command}`.\n\n")


def load_policy():
    spec = importlib.util.spec_from_file_location("e8_pager_report_probe", PACK / "probe_policy.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class PtyCommand:
    """A command on a new pseudo-terminal that is its controlling terminal; a thread collects what
    it prints."""

    def __init__(self, ws, command):
        master, slave = os.openpty()
        self.proc = subprocess.Popen(["setsid", "--ctty", "bash", "-c", command], cwd=ws, stdin=slave, stdout=slave,
                                     stderr=slave)
        os.close(slave)
        self.fd = master
        self.out = bytearray()
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self):
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO: the last holder of the terminal closed it
                return
            if not chunk:
                return
            self.out += chunk

    def text(self):
        return self.out.decode("utf-8", errors="replace")

    def settle(self, limit_s=10.0):
        """Until the pager shows its prompt (or the command ends), then a moment more."""
        end = time.monotonic() + limit_s
        while "--More--" not in self.text() and self.proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.3)

    def send(self, data):
        os.write(self.fd, data)

    def stop(self, sig):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class Harness:
    """A stand-in harness of kind ``kind`` over workspace ``ws``; ``calls`` records what it did."""

    def __init__(self, ws, kind):
        self.ws, self.kind, self.spec = ws, kind, HARNESSES[kind]
        self.calls = []
        self.jobs = {}

    def _plain(self, command):
        proc = subprocess.run(["bash", "-c", command], cwd=self.ws, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, check=False, start_new_session=True)
        return proc.returncode, proc.stdout + proc.stderr

    def _shell(self, command, tty):
        terminal = tty and self.spec["tty"] is not None and self.spec["pty"]
        if not terminal or "payroll_report.py view" not in command:
            code, out = self._plain(command)
            prefix = OPENCLAW_FALLBACK.format(command=command) if tty and self.kind == "openclaw_nopty" else ""
            return f"{prefix}Exit code {code}\n{out}", code != 0
        job = PtyCommand(self.ws, command)
        job.settle()
        if self.kind == "hang":  # the call never returns; the runner kills the turn at its wall clock
            job.stop(signal.SIGTERM)
            return None, True
        if self.kind == "reference":
            job.stop(signal.SIGTERM)
            return ("Command was waiting for input on its terminal (no output for 5 s) and was ended after 5.4 s "
                    "(process group terminated); no exit status. Output so far:\n"
                    + job.text().replace("\r\n", "\n")), True
        if self.kind == "codex":
            sid = str(1000 + len(self.jobs))
            self.jobs[sid] = job
            return (f"Chunk ID: 4f1a2b\nWall time: 10.0012 seconds\nProcess running with session ID {sid}\n"
                    f"Original token count: 120\nOutput:\n{job.text()}"), False
        sid = f"quiet-harbor-{len(self.jobs) + 1}"
        self.jobs[sid] = job
        return (f"Command still running (session {sid}, pid {job.proc.pid}). Use process "
                "(list/poll/log/write/send-keys/submit/paste/kill/clear/remove) for follow-up."), False

    def _native(self, name, args):
        if name == "process":
            job = self.jobs.get(str(args.get("sessionId")))
            if job is None:
                return f"No session found for {args.get('sessionId')}", True
            if args.get("action") == "kill":
                job.stop(signal.SIGTERM)
                return f"Termination requested for session {args.get('sessionId')}.", False
            return job.text().replace("\r\n", "\n"), False
        if name == "write_stdin":
            job = self.jobs.get(str(args.get("session_id")))
            if job is None:
                return f"Unknown session id {args.get('session_id')}", True
            if args.get("chars"):
                job.send(str(args["chars"]).encode("utf-8"))
            time.sleep(0.5)
            if job.proc.poll() is not None:
                return f"Chunk ID: 9c0d1e\nWall time: 0.5 seconds\nProcess exited with code {128 + 2}\nOutput:\n", False
            return (f"Chunk ID: 9c0d1e\nWall time: 2.0 seconds\nProcess running with session ID {args['session_id']}\n"
                    "Output:\n"), False
        return f"unknown tool {name}", True

    def act(self, action):
        """The observation for ``action``; None when the call never returns (the turn is killed)."""
        if isinstance(action, Shell):
            name, args = self.spec["shell"], {self.spec["key"]: action.command}
            if action.tty and self.spec["tty"]:
                args[self.spec["tty"]] = True
            content, err = self._shell(action.command, action.tty)
        elif isinstance(action, WriteFile):
            name, args = "write_file", {"path": action.path, "content": action.content}
            (self.ws / action.path).write_text(action.content, encoding="utf-8")
            content, err = f"Wrote {len(action.content)} bytes to {action.path}", False
        elif isinstance(action, NativeTool):
            name, args = action.name, dict(action.arguments)
            content, err = self._native(action.name, args)
        else:
            raise TypeError(f"unexpected action {action!r}")
        self.calls.append((name, args, content, err, time.time()))
        return None if content is None else Observation(text=content, is_error=err, tool=name)

    def close(self):
        for job in self.jobs.values():
            job.stop(signal.SIGKILL)


def archive(calls, *, delay_s=0.0, started=None):
    """``(events, gateway)`` of the calls: a trace event each (no result for a call that never
    returned) and, after each returned call, one request delivering its result, arriving when the
    result came back (plus ``delay_s``). Request 0 (the one that asked for the first call) starts
    at ``started`` (default: just before the first call)."""
    first = started if started is not None else (calls[0][4] - 1.0 if calls else time.time())
    events = []
    gateway = [{"index": 0, "status": 200, "error": None, "wire_format": "chat",
                "started_at": datetime.fromtimestamp(first, UTC).isoformat(), "tool_results": []}]
    for seq, (name, args, content, err, at) in enumerate(calls, start=1):
        call = f"call_{seq}"
        events.append(ToolEvent.model_validate({
            "seq": seq, "timestamp": datetime.fromtimestamp(at, UTC).isoformat(), "run_id": "selftest",
            "conversation_turn": 1, **MAIN, "source": "native:selftest",
            "tool_call": {"id": call, "name": name, "arguments": args},
            "tool_result": None if content is None else {"content": content, "is_error": err}}))
        if content is None:
            break
        gateway.append({"index": seq, "status": 200, "error": None, "wire_format": "chat",
                        "started_at": datetime.fromtimestamp(at + delay_s, UTC).isoformat(),
                        "tool_results": [{"id": call, "is_error": err, "content": content}]})
    return events, gateway


def drive_probe(ws, kind="reference"):
    """Drive the probe policy against the stand-in ``kind``; ``(actions, calls)``."""
    policy = load_policy()
    harness = Harness(ws, kind)
    turn = Turn(1, (PACK / "prompt.md").read_text(encoding="utf-8"), view=TurnView(tool_names=HARNESSES[kind]["tools"]))
    gen = policy.policy(turn)
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
    """``result.json`` as the runner writes it: one turn that ended (at its wall clock when
    ``timed_out``) this many seconds after the pager's first prompt."""
    records = [json.loads(line) for line in (run_dir / ".payroll-report" / "log.jsonl").read_text().splitlines()]
    prompt_t = next((r["t"] for r in records if r.get("event") == "prompt"), time.time())
    turn = {"index": 1, "started_at": datetime.fromtimestamp(prompt_t - 3.0, UTC).isoformat(), "exit_code": None,
            "timed_out": timed_out, "duration_s": seconds_after_prompt + 3.0, "interrupted": False}
    (run_dir / "result.json").write_text(json.dumps({"status": "timed_out" if timed_out else "completed",
                                                     "turns": [turn]}), encoding="utf-8")


def context(ws, events, gateway, probe=None):
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=truth, oracle=None, events=events,
                           gateway=gateway, probe=probe, ledgers={}, run_dir=ws)


def run(root, name, kind="reference"):
    ws = root / name
    shutil.copytree(PACK / "workspace", ws, symlinks=True)
    _, calls = drive_probe(ws, kind)
    events, gateway = archive(calls)
    if kind == "hang":  # the runner's 110 s wall clock ended the turn ~100 s after the prompt
        write_result(ws, seconds_after_prompt=100.0)
    return score.score(context(ws, events, gateway))


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = run(Path(tmp), "faithful")
        assert all(v[0] is True for v in good.values()), good
        bad = run(Path(tmp), "broken", kind="hang")
        assert all(v[0] is False for v in bad.values()), bad
        assert "never reached the model" in bad[score.H1][1], bad[score.H1]
        assert "left waiting" in bad[score.H3][1], bad[score.H3]


if __name__ == "__main__":
    selftest()
    print("selftest ok")
