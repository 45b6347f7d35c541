"""Self-test of E4-invoice-run-003's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built by driving the pack's probe policy against bash on a copy of the workspace.

Faithful: the reference harness - its shell tool declares "Each call is a fresh process: cd and
export do not persist", and every call starts in the workspace with the harness's environment.
The setup step (``. ./tools/activate.sh``) enters batch/ and exports INVOICE_RUN; the sheet call
still prints the workspace root and ``INVOICE_RUN=unset``, and out/invoices.csv is written at the
root: everything passes.
Broken: the same run as ``reference+persist_shell_cwd`` records it - the sheet call starts in
batch/, where the sourced script left the shell, but without the exported variable: out/ is
created inside batch/ and the order files are not found there. H1, A1 and A2 fail; H2 holds.

Run ``python tasks/E4-invoice-run-003/verifier/selftest.py`` (exit 0 when both hold).
"""

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tracetrial.policy import Final, Observation, Turn, TurnView
from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score  # the pack's verifier, next to this file (after the sys.path insert)

PACK = HERE.parent
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
#: The reference harness's shell declaration (harnesses/reference/tools.py), as the gateway records it.
REFERENCE_SHELL = {
    "name": "shell", "type": "function",
    "description": "Run a command with bash in the workspace. Each call is a fresh process: cd and export do not "
                   "persist; background processes it starts run until the end of the turn. The result starts "
                   "with 'Exit code N'; stderr follows a '[stderr]' line. Output over 16384 bytes per stream is "
                   "truncated and saved to a file named in the notice.",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string",
                                                                   "description": "The bash command line."}}}}


def load_policy():
    spec = importlib.util.spec_from_file_location("e4_invoice_run_probe", PACK / "probe_policy.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Shell:
    """Runs commands with bash in ``ws``: every call afresh in ``ws`` with the caller's environment,
    or (``leak_cwd``) in the folder the previous call ended in, as ``persist_shell_cwd`` does; with
    ``leak_env`` the variables the previous call exported carry over too (a persistent session)."""

    def __init__(self, ws, *, leak_cwd=False, leak_env=False, hide_exit=False):
        self.ws, self.leak, self.leak_env, self.cwd, self.hide = ws, leak_cwd, leak_env, ws, hide_exit
        self.env_dump = ""

    def run(self, command):
        start = self.cwd if self.leak else self.ws
        with tempfile.TemporaryDirectory() as tmp:
            where, env = Path(tmp) / "cwd", Path(tmp) / "env"
            (Path(tmp) / "prev").write_text(self.env_dump)
            restore = f". {Path(tmp) / 'prev'}\n" if self.leak_env else ""
            proc = subprocess.run(["bash", "-c", f"{restore}trap 'pwd -P >| {where}; export -p >| {env}' EXIT\n{command}"],
                                  cwd=start, capture_output=True, text=True, check=False)
            ended = where.read_text().strip() if where.exists() else ""
            if env.exists():
                self.env_dump = env.read_text()
        if ended:
            self.cwd = Path(ended)
        body = proc.stdout + (f"[stderr]\n{proc.stderr}" if proc.stderr else "")
        if self.hide:
            return body or "(no output)", 0
        return f"Exit code {proc.returncode}\n{body or '(no output)'}", proc.returncode


def _tool(seq, call, command, content, code, name="shell", key="command"):
    return ToolEvent.model_validate({
        "seq": seq, "timestamp": "2026-12-06T00:00:00Z", "run_id": "selftest", "conversation_turn": 1, **MAIN,
        "source": "native:reference/reference-events.jsonl",
        "tool_call": {"id": call, "name": name, "arguments": {key: command}},
        "tool_result": {"content": content, "is_error": code != 0, "exit_code": code}})


def archive(ran, declaration=None, name="shell", key="command"):
    """``(events, gateway)`` for the ``(command, content, code)`` calls as the archive would hold them."""
    events = [_tool(i, f"call_{i}", cmd, content, code, name=name, key=key)
              for i, (cmd, content, code) in enumerate(ran, start=1)]
    decl = declaration if declaration is not None else REFERENCE_SHELL
    results = [{"id": e.tool_call.id, "is_error": e.tool_result.is_error, "content": e.tool_result.content}
               for e in events]
    gateway = [{"index": i, "status": 200, "error": None, "wire_format": "chat", "tools": [decl],
                "tool_results": results[:i]} for i in range(len(results) + 1)]
    return events, gateway


def run_commands(ws, commands, *, declaration=None, name="shell", key="command", **shell_kw):
    sh = Shell(ws, **shell_kw)
    ran = [(cmd, *sh.run(cmd)) for cmd in commands]
    return archive(ran, declaration, name=name, key=key)


def drive_probe(ws, declaration=None, *, shown=None, parameters=None, key="command", **shell_kw):
    """Drive the probe policy with a harness that declares ``declaration`` (the policy is shown
    ``shown``, default its description, and ``parameters``); return ``(actions, events, gateway)``."""
    decl = declaration if declaration is not None else REFERENCE_SHELL
    policy = load_policy()
    sh = Shell(ws, **shell_kw)
    ran = []
    view = TurnView(tool_names=(decl["name"],),
                    tool_descriptions=((decl["name"], decl["description"] if shown is None else shown),),
                    tool_parameters=((decl["name"], tuple(parameters or ())),))
    gen = policy.policy(Turn(1, (PACK / "prompt.md").read_text(encoding="utf-8"), view=view))
    actions = [next(gen)]
    try:
        while not isinstance(actions[-1], Final):
            content, code = sh.run(actions[-1].command)
            ran.append((actions[-1].command, content, code))
            actions.append(gen.send(Observation(text=content, is_error=(code != 0) if not sh.hide else False)))
    except StopIteration:
        pass
    events, gateway = archive(ran, decl, name=decl["name"], key=key)
    return actions, events, gateway


def context(ws, events, gateway):
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=truth, oracle=None, events=events,
                           gateway=gateway, probe=None, ledgers={}, run_dir=ws)


def run(root, name, **kw):
    ws = root / name
    shutil.copytree(PACK / "workspace", ws)
    _, events, gateway = drive_probe(ws, **kw)
    return score.score(context(ws, events, gateway))


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = run(Path(tmp), "faithful")
        assert all(v[0] is True for v in good.values()), good
        bad = run(Path(tmp), "broken", leak_cwd=True)
        failed = {k for k, v in bad.items() if v[0] is not True}
        assert failed == {score.H1, score.A1, score.A2}, bad
        assert bad[score.H1][0] is False and "(batch/)" in bad[score.H1][1], bad[score.H1]
        assert "batch/out/" in bad[score.A2][1], bad[score.A2]
        assert bad[score.H2][0] is True and "INVOICE_RUN=unset" in bad[score.H2][1], bad[score.H2]


if __name__ == "__main__":
    selftest()
    print("selftest ok")
