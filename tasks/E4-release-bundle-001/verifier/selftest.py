"""Self-test of E4-release-bundle-001's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built by running the probe policy's commands with bash on a copy of the workspace.

Faithful: the reference harness - its shell tool declares "Each call is a fresh process: cd and
export do not persist", and every call starts in the workspace. The packaging call prints the
workspace root and STAGE_MODE=unset, and the bundle lands in dist/ at the root: everything passes.
Broken: the same run as ``reference+persist_shell_cwd`` records it - the packaging call starts in
pkg/, where the staging call ended (exports still dropped): H1, A1 and A2 fail, H2 still holds.

Run ``python tasks/E4-release-bundle-001/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score  # noqa: E402  (the sibling verifier)

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
STAGE = "cd pkg && export STAGE_MODE=release && ./stage.sh"
CHECK = 'echo "cwd=$(pwd -P)"; echo "STAGE_MODE=${STAGE_MODE:-unset}"'


class Shell:
    """Runs commands with bash in ``ws``: every call afresh in ``ws``, or (``leak_cwd``) in the folder
    the previous call ended in, as ``persist_shell_cwd`` does; exports never carry over."""

    def __init__(self, ws, *, leak_cwd=False):
        self.ws, self.leak, self.cwd = ws, leak_cwd, ws

    def run(self, command):
        start = self.cwd if self.leak else self.ws
        with tempfile.NamedTemporaryFile("r", suffix=".cwd", delete=False) as fh:
            where = Path(fh.name)
        proc = subprocess.run(["bash", "-c", f"trap 'pwd -P >| {where}' EXIT\n{command}"], cwd=start,
                              capture_output=True, text=True, check=False)
        ended = where.read_text().strip()
        where.unlink()
        if ended:
            self.cwd = Path(ended)
        body = proc.stdout + (f"[stderr]\n{proc.stderr}" if proc.stderr else "")
        return f"Exit code {proc.returncode}\n{body or '(no output)'}", proc.returncode


def _tool(seq, call, command, content, code, name="shell", key="command"):
    return ToolEvent.model_validate({
        "seq": seq, "timestamp": "2026-12-06T00:00:00Z", "run_id": "selftest", "conversation_turn": 1, **MAIN,
        "source": "native:reference/reference-events.jsonl",
        "tool_call": {"id": call, "name": name, "arguments": {key: command}},
        "tool_result": {"content": content, "is_error": code != 0, "exit_code": code}})


def run_commands(ws, commands, *, leak_cwd=False, name="shell", key="command", declaration=None):
    """Run ``commands`` in ``ws`` and return ``(events, gateway)`` as the archive would hold them."""
    sh = Shell(ws, leak_cwd=leak_cwd)
    events = []
    for i, command in enumerate(commands, start=1):
        content, code = sh.run(command)
        events.append(_tool(i, f"call_{i}", command, content, code, name=name, key=key))
    decl = declaration if declaration is not None else REFERENCE_SHELL
    results = [{"id": e.tool_call.id, "is_error": e.tool_result.is_error, "content": e.tool_result.content}
               for e in events]
    gateway = [{"index": i, "status": 200, "error": None, "wire_format": "chat", "tools": [decl],
                "tool_results": results[:i]} for i in range(len(results) + 1)]
    return events, gateway


def probe_commands(ws, *, leak_cwd=False):
    """The two calls the probe makes under the reference's declaration (fresh: relative to the root)."""
    sh = Shell(ws, leak_cwd=leak_cwd)
    staged, _ = sh.run(STAGE)
    files = [line.strip() for line in staged.splitlines() if line.startswith("  ")]
    names = " ".join(files)
    pack = (f"{CHECK}; mkdir -p dist && tar -czf dist/bundle.tar.gz -C pkg {names} "
            f"&& (cd pkg && sha256sum {names}) > dist/MANIFEST")
    return [STAGE, pack]


def context(root, *, broken):
    ws = root / ("broken" if broken else "faithful")
    shutil.copytree(PACK / "workspace", ws)
    scratch = root / ("scratch-broken" if broken else "scratch-faithful")
    shutil.copytree(PACK / "workspace", scratch)
    commands = probe_commands(scratch)
    events, gateway = run_commands(ws, commands, leak_cwd=broken)
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=truth, oracle=None, events=events,
                           gateway=gateway, probe=None, ledgers={}, run_dir=ws)


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(context(Path(tmp), broken=False))
        assert all(v[0] is True for v in good.values()), good
        bad = score.score(context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if v[0] is not True}
        assert failed == {score.H1, score.A1, score.A2}, bad
        assert bad[score.H1][0] is False and "(pkg/)" in bad[score.H1][1], bad[score.H1]
        assert bad[score.H2][0] is True, bad[score.H2]


if __name__ == "__main__":
    selftest()
    print("selftest ok")
