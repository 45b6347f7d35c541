"""Capture real native output of the pinned CLIs for the golden normalizer tests.

Each case runs the real adapter (real ``claude`` / ``codex`` binary, real flags, real
config) and archives what the adapter archived (``native/``) plus ``capture.json``
under ``tests/harnesses/golden/<harness>/<case>/``. The model is either

* ``probe``: the real TraceTrial chain — LiteLLM gateway pass-through route ->
  probe model server driven by a policy in ``probe_policies/<case>.py``; or
* ``scripted``: :class:`~tests.harnesses.scripted_server.ScriptedServer`, for what the
  probe never does on purpose (reusing a tool-call id across turns).

Re-capture (overwrites the fixtures; review the snapshot diff afterwards)::

    python -m tests.harnesses.capture [harness[/case]] ...
    python -m pytest tests/harnesses --snapshot-update

A named installed version (``tracetrial install codex@0.171.0``) is captured with the same
cases into ``golden/<harness>/<case>@<version>/`` (its own fixtures beside the pins')::

    python -m tests.harnesses.capture codex@0.171.0[/case] ...
"""

from __future__ import annotations

import contextlib
import json
import re
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harnesses.base import (
    HarnessAdapter,
    McpServer,
    RunContext,
    TurnContext,
    TurnOutcome,
    WireFormat,
)
from harnesses.registry import get_harness
from tests.harnesses.scripted_server import Reply, ScriptedServer, text, tool
from tracetrial.archive import RunPaths
from tracetrial.task import SessionBoundary, TaskPack, load_task

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
REPO = HERE.parent.parent
EXAMPLE_PACK = REPO / "tasks" / "E1-build-status-001"
MCP_SERVER = HERE / "mcp_lookup_server.py"
POLICIES = HERE / "probe_policies"
CAPTURED_WITH = {
    "probe": "real CLI + adapter -> LiteLLM gateway (apparatus.gateway, pass-through) -> probe model "
    "(apparatus.probe) driven by tests/harnesses/probe_policies/{case}.py",
    "scripted": "real CLI + adapter -> scripted model server (tests/harnesses/scripted_server.py)",
}


@dataclass
class Case:
    """One capture: user turns (text, boundary), the model (probe policy or script), options."""

    turns: list[tuple[str, SessionBoundary | None]]
    script: list[Reply] = field(default_factory=list)
    child_script: list[Reply] = field(default_factory=list)
    via: Literal["probe", "scripted"] = "scripted"
    permission_mode: Literal["bypass", "native"] = "bypass"
    mcp: bool = False
    deadline_s: float = 60.0
    #: probe policy module in ``probe_policies/`` (default: the case name)
    policy: str | None = None
    #: a task pack under ``tasks/`` whose prompt, workspace, probe policy and ``PROBE_OPTIONS``
    #: drive the case (its ``budgets`` reach the adapter as in a cell), instead of the example pack
    pack: str | None = None


def _sh(harness: str, call_id: str, command: str) -> Reply:
    if harness == "claude_code":
        return tool(call_id, "Bash", {"command": command, "description": "run a command"})
    return tool(call_id, "exec_command", {"cmd": command})


NEW = SessionBoundary(kind="new_session", history_replayed=False, workspace_preserved=True)
RESUME = SessionBoundary(kind="resume", history_replayed=True, workspace_preserved=True)


def cases(harness: str) -> dict[str, Case]:
    """The capture cases of one harness (the same scenarios for both CLIs where they apply)."""
    probe: dict[str, Any] = {"via": "probe"}
    out = {
        "tool_roundtrip": Case([("Show me notes.txt.", None)], **probe),
        "nonzero_exit": Case([("Run the build with python3 build.py.", None)], **probe),
        "large_output": Case([("Print a long sequence twice.", None)], **probe),
        "multi_turn_resume": Case(
            [("Write one to a.txt.", None), ("Now append two.", RESUME), ("New session: show a.txt.", NEW)], **probe
        ),
        "api_error": Case([("Say hello.", None)], **probe),
        "mcp_native": Case(
            [("Look up alpha and boom, then touch marker.", None)], permission_mode="native", mcp=True, **probe
        ),
        # The probe's call ids are unique per run; a model reusing an id in another turn (here:
        # turn 3, a new session) is scripted, so the trace must turn-scope it (SPEC §7 rule 3).
        "reused_call_ids": Case(
            [("Write one to a.txt.", None), ("Now append two.", RESUME), ("New session: show a.txt.", NEW)],
            [
                _sh(harness, "call_mt_1", "echo one > a.txt"),
                text("Wrote one."),
                _sh(harness, "call_mt_2", "echo two >> a.txt"),
                text("Appended two."),
                _sh(harness, "call_mt_1", "cat a.txt"),
                text("a.txt has one and two."),
            ],
        ),
    }
    if harness in ("openclaw", "deepseek"):
        # every request answered HTTP 500, more often than the harness retries
        out["api_error_persistent"] = Case([("Say hello.", None)], **probe)
    if harness == "claude_code":
        out["subagent"] = Case([("Delegate: have a helper run echo hi.", None)], **probe)
        out["compaction"] = Case(
            [("Write one to a.txt.", None), ("/compact", RESUME), ("What is in a.txt?", RESUME)], **probe
        )
        out["subagent_background"] = Case([("Delegate in the background: have a helper run echo hi.", None)], **probe)
    if harness in ("codex", "openclaw"):
        # Automatic compaction under context pressure, as the C2 cells trigger it: the pack tells the
        # harness a 100,000-token window and the probe reports a 92,000-token prompt from request 3.
        out["compaction"] = Case([], pack="C2-retention-config-001", deadline_s=240, **probe)
    if harness == "codex":
        # multi_agent_v1: spawn_agent returns the child's id at once; the parent waits with wait_agent.
        out["subagent"] = Case([("Delegate: have a helper run echo hi.", None)], policy="codex_subagent", **probe)
        # The parent answers while the child runs: `exec` ends the run and aborts the child.
        out["subagent_pending"] = Case(
            [("Delegate in the background: have a helper run a slow echo.", None)],
            policy="codex_subagent_pending",
            **probe,
        )
    return out


def make_workspace(dest: Path, pack: TaskPack | None = None) -> Path:
    """The example workspace, or a copy of ``pack``'s own workspace."""
    if pack is not None:
        shutil.copytree(pack.workspace, dest, symlinks=True)
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    shutil.copy2(EXAMPLE_PACK / "workspace" / "build.py", dest / "build.py")
    return dest


#: The gateway key of the unit tests' run contexts (never written to an archive).
TEST_KEY = "sk-tt-test-0123456789abcdef"


def run_context(tmp_path: Path, *, url: str, mcp: bool = False, mode: str = "bypass") -> RunContext:
    """Run ``r1`` of the example pack under ``tmp_path`` (``run/``, ``home/``, ``ws/``) with
    the gateway at ``url``; ``mcp`` adds the lookup MCP server."""
    paths = RunPaths(tmp_path / "run")
    paths.make()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    servers = [McpServer("lookup", "/usr/bin/python3", (str(MCP_SERVER),), {"LOOKUP_MODE": "test"})] if mcp else []
    return RunContext(
        run_id="r1", task=load_task(EXAMPLE_PACK), paths=paths, workspace=make_workspace(tmp_path / "ws"),
        model="probe", gateway_base_url=url, gateway_key=TEST_KEY, mcp_servers=servers,
        permission_mode=mode,  # type: ignore[arg-type]
        wall_clock_s=60, home=home,
    )


def base_url(server_url: str, wire: str, run_id: str) -> str:
    """What the gateway hands out: ``/tt/probe/<run>`` (anthropic) or ``…/v1`` (responses)."""
    return f"{server_url}/tt/probe/{run_id}" + ("/v1" if wire == "responses" else "")


class ProbeChain:
    """The real probe model server behind the real LiteLLM gateway (started once, ~20 s)."""

    def __init__(self, workdir: Path):
        from apparatus.gateway import Gateway
        from apparatus.probe.server import ProbeServer

        self.probe = ProbeServer().start()
        self.gateway = Gateway(
            records_dir=workdir / "gateway", log_path=workdir / "gateway.log", probe_url=self.probe.url
        ).start()

    def route(self, run_id: str, wire: WireFormat) -> tuple[str, str]:
        return self.gateway.base_url(run_id, "probe", wire), self.gateway.api_key(run_id)

    def close(self) -> None:
        self.gateway.stop()
        self.probe.stop()


def run_case(
    adapter: HarnessAdapter,
    case: Case,
    root: Path,
    task: TaskPack,
    *,
    run_id: str = "golden",
    chain: ProbeChain | None = None,
    policy: Path | None = None,
    on_turn: Callable[[TurnOutcome], None] | None = None,
) -> tuple[RunContext, list[TurnOutcome], int]:
    """Run ``case`` through the real adapter into ``root`` (run dir + scratch); returns the
    context, the turn outcomes and the number of model requests served."""
    paths = RunPaths(root / "run")
    paths.make()
    mcp = [McpServer("lookup", sys.executable, (str(MCP_SERVER),))] if case.mcp else []
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if case.via == "probe" and case.pack is not None:
            assert chain is not None
            chain.probe.register_run(run_id, task)  # the pack's own policy, options and turns
            url, key = chain.route(run_id, adapter.wire_format)
        elif case.via == "probe":
            assert chain is not None and policy is not None
            chain.probe.register_run(run_id, policy, options={"turns": [t for t, _ in case.turns]})
            url, key = chain.route(run_id, adapter.wire_format)
        else:
            server = stack.enter_context(ScriptedServer(case.script, child_script=case.child_script))
            url, key = (base_url(server.url, adapter.wire_format, run_id), "sk-tt-golden-0000000000000000")
        ctx = RunContext(
            run_id=run_id,
            task=task,
            paths=paths,
            workspace=make_workspace(root / "workspace", task if case.pack is not None else None),
            model="probe",
            gateway_base_url=url,
            gateway_key=key,
            mcp_servers=mcp,
            permission_mode=case.permission_mode,
            wall_clock_s=case.deadline_s,
            home=home,
        )
        outcomes: list[TurnOutcome] = []
        turns = case.turns or [(t.user, t.session_boundary) for t in task.user_turns]
        for index, (user, boundary) in enumerate(turns, start=1):
            outcome = adapter.run_turn(ctx, TurnContext(index, user, boundary, case.deadline_s))
            outcomes.append(outcome)
            if on_turn is not None:
                on_turn(outcome)
        adapter.collect(ctx)
        if case.via == "probe":
            assert chain is not None
            report = chain.probe.finish_run(run_id)
            if report.apparatus_errors:
                raise RuntimeError(f"probe apparatus errors in {run_id}: {report.apparatus_errors}")
            served = len(report.requests)
        else:
            served = len(server.model_requests())
    return ctx, outcomes, served


def golden_dir(harness: str, name: str) -> Path:
    """``golden/<harness>/<case>``; a named version ``<harness>@<v>`` gets ``<case>@<v>``."""
    base, _, version = harness.partition("@")
    return GOLDEN / base / (f"{name}@{version}" if version else name)


def capture(harness: str, name: str, chain: ProbeChain | None) -> Path:
    adapter = get_harness(harness)
    base = harness.partition("@")[0]
    case = cases(base)[name]
    task = load_task(REPO / "tasks" / case.pack if case.pack else EXAMPLE_PACK)
    dest = golden_dir(harness, name)
    turns: list[dict[str, object]] = []

    def record(o: TurnOutcome) -> None:
        turns.append(
            {
                "index": o.index,
                "exit_code": o.exit_code,
                "timed_out": o.timed_out,
                "duration_s": round(o.duration_s, 3),
                "session_id": o.session_id,
                "children_max_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            }
        )

    run_id = f"golden-{base.replace('_', '-')}-{name.replace('_', '-')}"
    # A named version's ``@`` and ``.`` become ``_``: the snapshots mask the scratch folder by a
    # word-character pattern (``/tmp/tt-golden-<harness>-<random>``), which they would break.
    scratch = re.sub(r"\W", "_", harness)
    with tempfile.TemporaryDirectory(prefix=f"tt-golden-{scratch}-") as tmp:
        ctx, _, served = run_case(
            adapter,
            case,
            Path(tmp),
            task,
            run_id=run_id,
            chain=chain,
            policy=POLICIES / f"{case.policy or name}.py",
            on_turn=record,
        )
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(ctx.paths.native, dest / "native")
        scrub_machine_paths(dest / "native")
        meta = {
            "harness": base,
            **({"named_version": harness} if harness != base else {}),
            "version": adapter.version(),
            "case": name,
            "run_id": run_id,
            "captured_with": (CAPTURED_WITH[case.via].format(case=case.policy or name) if case.pack is None else
                              CAPTURED_WITH[case.via].split(" driven by ")[0]
                              + f" driven by tasks/{case.pack}/probe_policy.py (its PROBE_OPTIONS, prompt and workspace)"),
            "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "permission_mode": case.permission_mode,
            "turns": turns,
            "model_requests": served,
        }
        (dest / "capture.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    return dest


def scrub_machine_paths(folder: Path) -> None:
    """Committed fixtures name no machine path: the repo becomes ``/repo``, the interpreter
    ``/usr/bin/python3`` and PATH a plain system PATH (the adapters record argv and env)."""
    import os
    import sys

    from apparatus.tools import tools_dir

    repo = str(Path(__file__).resolve().parents[2])
    # the tools folder first: ``$TT_TOOLS_DIR`` may lie outside the repo (a worktree capturing
    # with another checkout's installs); in the fixtures it is the repo's default ``.tt-tools``
    swaps = [(os.environ.get("PATH", ""), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
             (str(tools_dir()), "/repo/.tt-tools"), (sys.executable, "/usr/bin/python3"), (repo, "/repo")]
    for path in folder.rglob("*"):
        if not path.is_file() or path.suffix not in (".json", ".toml", ".jsonl", ".stdout", ".stderr", ".yml"):
            continue
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        new = text
        for old, replacement in swaps:
            if old:
                new = new.replace(old, replacement)
        if new != text:
            path.write_text(new, encoding="utf-8", errors="surrogateescape")


def main(argv: list[str]) -> int:
    selected = [
        (h, n)
        for target in (argv or ["claude_code", "codex"])
        for h, _, only in [target.partition("/")]
        for n in cases(h.partition("@")[0])
        if not only or n == only
    ]
    chain = None
    with tempfile.TemporaryDirectory(prefix="tt-golden-chain-") as work:
        try:
            if any(cases(h.partition("@")[0])[n].via == "probe" for h, n in selected):
                chain = ProbeChain(Path(work))
            for harness, name in selected:
                dest = capture(harness, name, chain)
                print(f"captured {harness}/{name} -> {dest.relative_to(REPO)}", flush=True)
        finally:
            if chain is not None:
                chain.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
