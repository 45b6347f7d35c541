"""DeepSeek Harness adapter: the pinned runtime (``deepseek-harness-runtime-bin==0.1.0rc6``,
the paper's version) driven natively over stdio JSON-RPC 2.0 (HARNESSES.md, DeepSeek Harness).

Per run one runtime process (:class:`~harnesses.deepseek.rpc.Runtime`), started with a clean
environment::

    DSH_CORDIS_CONFIG=<the bundled runtime/cordis.yml>   DEEPSEEK_BASE_URL=<gateway …/v1>
    DEEPSEEK_API_KEY=<gateway key>   DSH_CWD=<workspace>   DSH_SESSION_ROOT=<run home>/dsh-sessions

    -> initialize {cwd, provider: "deepseek-official", model}
    -> session/prompt {sessionId, contentBlocks: [{type: text, text}]}     (one per user turn)
    <- notifications session.event / session.status … until the session is idle again
    -> shutdown                                                              (in collect())

A turn is over when the runtime reports the session ``idle`` after the inbox receipt of the
turn's message (the SDK's ``Session.run`` boundary). A resumed turn sends its prompt to the
same session in the same process — the runtime's only native continuation (a new process
refuses a persisted session id as an id collision); a ``new_session`` boundary opens a new
session id in the same runtime (the SDK's ``start_session``).

Exit status of a turn (there is no process per turn): ``0`` when the turn's last ``turn/end``
says ``completed``, ``1`` for any other ending (``error``, ``max-tokens``…, as the SDK's
``finish_reason``/the server's success status read it); ``None`` with an error when the
runtime died or did not answer, ``timed_out`` when the wall clock ran out (the process group
is killed).

MCP: rc6 cannot load MCP servers. Its JSON-RPC server knows only ``initialize``,
``session/prompt`` and ``shutdown``; ``initialize`` takes ``cwd``, ``provider``, ``model``,
``maxTokens``; none of the 122 bundled plugin packages is an MCP client, and the bundled ACP
bridge rejects any ``mcpServers`` entry ("mcpServers is not supported"). So
``capabilities.mcp=False``: MCP-backed cells are recorded unsupported with that reason.
The bundled default ``cordis.yml`` (the paper's setup) enables only bash, jobs and skill tools:
no sub-agent, ask-user or approval plugin, hence the other capabilities — except ask-user, below.

Ask-user (tasks with ``ask_user`` in ``spec.tools``; every other task runs the bundled file
unchanged). The runtime bundles its ask-user channel — the ``ctx.userQuestions`` seam
(``@deepseek-ai/dsh-user-questions``) and the model-facing ``ask_user_question`` tool over it
(``@deepseek-ai/dsh-tool-ask-user``) — and leaves the answering to the provider its embedding
client registers (the client's UI). For such a task the adapter writes ``<home>/tt-cordis/
cordis.yml`` = the bundled file + those two packages + the benchmark's provider
(``harnesses/deepseek/tt-ask-provider.mjs``, copied beside it) and points
``DSH_CORDIS_CONFIG`` there. The provider sends each question to this client as a
``userQuestions/ask`` JSON-RPC request on the runtime's stdout; :class:`Runtime` answers it on
the host, in this process, through the benchmark's simulated user (``AskUserResponder``, ledger
``<run>/private/ledgers/_ask_user.jsonl``): a pick of an offered option comes back as
``selected: [label]``, anything else as ``custom`` text (:mod:`harnesses.deepseek.ask_user`).
The provider is the benchmark acting as the embedding client's UI (as Claude Code's
permission-prompt tool is for ``claude -p``), not harness behaviour: whether the tool is
declared, what the model may send, and how the answer reaches the model (the runtime renders
the tool's output ``{"answers": [...]}`` as the tool result) are the runtime's own.

Named versions whose runtime ships no bundled ``cordis.yml`` (0.2.x, ``deepseek@0.2.1rc2``) run
the ``sdk`` profile instead (:mod:`harnesses.deepseek.profile`): chosen once per install and
process by asking the installed runtime (:meth:`DeepSeekAdapter.surface`), never by the version
string. The JSON-RPC exchange above is the same; the launch, environment, wire format
(Anthropic Messages), capabilities (MCP through the runtime's own ``mcp-client``) and session
location differ. The pinned rc6 path never probes and is unchanged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar

from apparatus.sandbox.policy import collect_records, copy_record, is_record, is_record_folder
from harnesses.base import (
    HarnessAdapter,
    HarnessCapabilities,
    NormalizedTrace,
    RunContext,
    TurnContext,
    TurnOutcome,
    WireFormat,
    asks_user,
    recorded_time,
)
from harnesses.cli_adapter import turn_outcome, write_invocation
from harnesses.deepseek.ask_user import (
    ASK_METHOD,
    PROVIDER_FILE,
    answer_questions,
    simulated_user,
    write_ask_config,
)
from harnesses.deepseek import profile as sdk_profile
from harnesses.deepseek.normalize import normalize
from harnesses.deepseek.rpc import Handler, Runtime
from harnesses.install import (
    PIP_HARNESSES,
    install_hint,
    install_version_hint,
    pip_version_files,
    pip_version_of,
    pip_version_runtime,
    version_problem,
    version_root,
)
from harnesses.native import TurnFiles, turn_files
from harnesses.native import as_object as _obj
from harnesses.runner import ProcessOutcome, clean_env
from tracetrial.archive import RunPaths

PROVIDER = "deepseek-official"
#: The pinned distributions (``PIP_HARNESSES["deepseek"]``): name -> version.
PINNED = dict(r.split("==", 1) for r in PIP_HARNESSES["deepseek"])
RUNTIME_DIST = "deepseek-harness-runtime-bin"
INIT_TIMEOUT_S = 60.0


def runtime_paths() -> tuple[Path, Path] | None:
    """(runtime executable, bundled default cordis.yml) of the installed runtime package."""
    try:
        from deepseek_harness_runtime import (  # type: ignore[import-untyped]
            bundled_default_config_path,
            bundled_runtime_path,
        )
    except ImportError:
        return None
    try:
        return bundled_runtime_path(), bundled_default_config_path()
    except (FileNotFoundError, ValueError):
        return None



def _turn_status(messages: list[dict[str, Any]], session: str, receipt_index: int) -> str | None:
    """The reason kind of the last ``turn/end`` of ``session`` after ``receipt_index``."""
    kind = None
    for m in messages[receipt_index:]:
        params = _obj(m.get("params"))
        if m.get("method") != "session.event" or params.get("sessionId") != session:
            continue
        event = _obj(params.get("event"))
        if event.get("type") == "turn/end":
            reason = _obj(_obj(event.get("data")).get("reason"))
            kind = reason["kind"] if isinstance(reason.get("kind"), str) else "unknown"
    return kind


@dataclass(frozen=True)
class RuntimeSurface:
    """How an installed runtime is launched: ``cordis`` (rc6: ``DSH_CORDIS_CONFIG`` = the bundled
    ``config``) or ``profile`` (0.2.x: ``--profile sdk`` under ``DSH_HOME``); ``None`` runtime:
    the install offers neither (``why``)."""

    kind: Literal["cordis", "profile"] | None
    runtime: Path | None = None
    config: Path | None = None
    why: str | None = None


#: The pinned rc6 capabilities (the paper's setup: bundled cordis.yml, see the module docstring).
PINNED_CAPABILITIES = HarnessCapabilities(
    mcp=False, multi_turn=True, new_session=True, subagents=False, native_permissions=False,
    ask_user=True,  # the bundled ask_user_question tool + the client's user-questions provider
    model_call_budget=False,  # neither cordis.yml nor the runtime exposes one
    history_replay=False,  # no session fork in the runtime's protocol
    turn_interrupt=False,  # one JSON-RPC runtime serves every turn: no per-turn process to kill
)
#: The ``sdk`` profile of 0.2.x (:mod:`harnesses.deepseek.profile`), as verified on 0.2.1rc2.
PROFILE_CAPABILITIES = PINNED_CAPABILITIES.model_copy(update={
    "mcp": True,  # the bundled mcp-client plugin, inserted per server by the --patch overlay
    # subagent/subagent_fork are declared by the profile; the probe cannot drive them yet
    "apparatus_gaps": {"subagents": sdk_profile.SUBAGENT_GAP},
})

T = TypeVar("T")


class PerSurface(Generic[T]):
    """A class attribute whose value depends on the runtime surface of the instance's install:
    the pinned value on the class and on the plain adapter (so the pin never probes), the
    ``profile`` value on a named version whose install runs the ``sdk`` profile."""

    def __init__(self, pinned: T, profile: T):
        self.pinned, self.profile = pinned, profile

    def __get__(self, obj: object, owner: type | None = None) -> T:
        if isinstance(obj, DeepSeekAdapter) and obj.release and obj.surface().kind == "profile":
            return self.profile
        return self.pinned


class DeepSeekAdapter(HarnessAdapter):
    """The real DeepSeek Harness runtime (PyPI, pinned pre-release; named 0.2.x versions)."""

    name: ClassVar[str] = "deepseek"
    # rc6 posts Chat Completions; the 0.2.x provider route speaks Anthropic Messages.
    wire_format = PerSurface[WireFormat]("chat", "anthropic")
    capabilities = PerSurface(PINNED_CAPABILITIES, PROFILE_CAPABILITIES)
    install_hint: ClassVar[str] = install_hint("deepseek")
    #: release -> the probed surface of that install (once per install and process)
    _surfaces: ClassVar[dict[str, RuntimeSurface]] = {}

    def __init__(self, variant: str | None = None):
        super().__init__(variant)
        self._live: dict[str, Runtime] = {}

    named_versions: ClassVar[bool] = True

    # ------------------------------------------------------------------------ install
    def tools_root(self) -> Path | None:
        """``None`` for the pinned packages of the running interpreter, else the named
        version's own ``--target`` folder (``<tools>/versions/deepseek@<version>/``)."""
        return version_root(self.name, self.release) if self.release else None

    def runtime(self) -> tuple[Path, Path] | None:
        """(runtime executable, bundled cordis.yml) of the install this adapter runs."""
        root = self.tools_root()
        return runtime_paths() if root is None else pip_version_runtime(root)

    def surface(self) -> RuntimeSurface:
        """How this install's runtime is launched. The pin: always ``cordis`` (never probed). A
        named version: its bundled ``cordis.yml`` if it ships one, else the ``sdk`` profile if
        the runtime says it serves one (:func:`~harnesses.deepseek.profile.probe_sdk_profile`),
        read once per install and process; an install that cannot be read (absent) is reported
        as neither, so its capabilities stay the pin's."""
        if not self.release:
            return RuntimeSurface("cordis")
        known = self._surfaces.get(self.release)
        if known is not None:
            return known
        root = self.tools_root()
        assert root is not None
        files = pip_version_files(root) if root.is_dir() else {"runtime": None, "config": None}
        runtime, config = files["runtime"], files["config"]
        if runtime is None:
            found = RuntimeSurface(None, why="no runtime executable for this platform")
        elif config is not None:
            found = RuntimeSurface("cordis", runtime, config)
        elif sdk_profile.probe_sdk_profile(runtime):
            found = RuntimeSurface("profile", runtime)
        else:
            found = RuntimeSurface(None, runtime, why=(
                "its runtime package ships no bundled default cordis.yml and the runtime does not serve the "
                f"'{sdk_profile.PROFILE}' profile (`--profile {sdk_profile.PROFILE} --help`)"))
        self._surfaces[self.release] = found
        return found

    def unavailable_reason(self) -> str | None:
        if self.release:
            problem = version_problem(self.name, self.release)
            if problem is not None:
                return problem
            root = self.tools_root()
            assert root is not None
            got = pip_version_of(root, RUNTIME_DIST)
            if got != self.release:
                return (f"{RUNTIME_DIST} in {root} is {got!r}, not {self.release}; "
                        f"{install_version_hint(self.name, self.release)}")
            found = self.surface()
            if found.runtime is None:
                return (f"the {RUNTIME_DIST} package in {root} has no runtime executable for this platform; "
                        f"{install_version_hint(self.name, self.release)}")
            if found.kind is None:
                return f"{self.full_name}: {found.why}; this adapter cannot drive it"
            return None
        for dist, want in PINNED.items():
            try:
                got = dist_version(dist)
            except PackageNotFoundError:
                return self.install_hint
            if got != want:
                return f"{dist} is installed as {got} but {want} is pinned (the paper's version); {self.install_hint}"
        if runtime_paths() is None:
            return f"the {RUNTIME_DIST} package has no runtime executable for this platform; {self.install_hint}"
        return None

    def version(self) -> str:
        root = self.tools_root()
        if root is not None:
            got = pip_version_of(root, RUNTIME_DIST)
            if got is None:
                raise FileNotFoundError(install_version_hint(self.name, str(self.release)))
            return got
        try:
            return dist_version(RUNTIME_DIST)
        except PackageNotFoundError as exc:
            raise FileNotFoundError(self.install_hint) from exc

    # ------------------------------------------------------------------------------ run
    @staticmethod
    def session_root(ctx: RunContext) -> Path:
        return ctx.home / "dsh-sessions"

    def environment(self, ctx: RunContext, cordis: Path) -> dict[str, str]:
        """The whole process environment of the runtime (nothing inherited beyond PATH/locale)."""
        extra = {
            "DSH_CORDIS_CONFIG": str(cordis),
            "DEEPSEEK_BASE_URL": ctx.gateway_base_url,
            "DEEPSEEK_API_KEY": ctx.gateway_key,
            "DSH_CWD": str(ctx.workspace),
            "DSH_SESSION_ROOT": str(self.session_root(ctx)),
            **ctx.extra_env,
        }
        return clean_env(extra, home=ctx.home)

    @staticmethod
    def config(ctx: RunContext, bundled: Path) -> tuple[Path, dict[str, Handler]]:
        """The cordis file the runtime runs and the client's handlers of the runtime's requests:
        the bundled file and none, or — for a task with ``ask_user`` — ``<home>/tt-cordis/cordis.yml``
        (bundled + the ask-user plugins + the benchmark's provider beside it) and the
        ``userQuestions/ask`` handler answering through the simulated user."""
        if not asks_user(ctx):
            return bundled, {}
        cordis = write_ask_config(bundled, ctx.home / "tt-cordis")
        answer = simulated_user(ctx.task, ctx.paths.private)
        return cordis, {ASK_METHOD: lambda request: answer_questions(request.get("params"), answer, str(request["id"]))}

    # ------------------------------------------------------------------ 0.2.x sdk profile
    @staticmethod
    def dsh_home(ctx: RunContext) -> Path:
        """``DSH_HOME`` of a 0.2.x run: its profile and sessions (``sessions/<cwd slug>/<id>/``)."""
        return ctx.home / "dsh-home"

    def profile_environment(self, ctx: RunContext) -> dict[str, str]:
        """The whole process environment of a 0.2.x runtime (nothing inherited beyond PATH/locale)."""
        extra = {
            "DSH_HOME": str(self.dsh_home(ctx)),
            "DEEPSEEK_BASE_URL": ctx.gateway_base_url,
            "DEEPSEEK_API_KEY": ctx.gateway_key,
            "DSH_TELEMETRY_MODE": "DISABLED",  # no OTLP collector: none is reachable or wanted
        }
        if ctx.permission_mode == "bypass":
            # the runtime's own no-sandbox, never-ask preset (as rc6's unconfined bash); a native
            # task keeps the harness default (workspace-write, approval ask, fails closed unanswered)
            extra["DSH_PERMISSION_MODE"] = sdk_profile.BYPASS_PERMISSION_MODE
        return clean_env({**extra, **ctx.extra_env}, home=ctx.home)

    def _profile_launch(self, ctx: RunContext, turn: TurnContext,
                        runtime: Path) -> tuple[list[str], dict[str, str], dict[str, Handler]]:
        """argv, environment and client handlers of a 0.2.x runtime (its overlay archived)."""
        ask = asks_user(ctx)
        overlay = sdk_profile.write_overlay(ctx.home / "tt-dsh", ctx.mcp_servers, ask)
        handlers: dict[str, Handler] = {}
        if ask:
            answer = simulated_user(ctx.task, ctx.paths.private)
            handlers[ASK_METHOD] = lambda request: answer_questions(request.get("params"), answer, str(request["id"]))
        native = ctx.paths.native
        if overlay is not None:
            shutil.copy2(overlay, native / f"turn-{turn.index}.{overlay.name}")
            if ask:
                answerer = sdk_profile.ANSWERER_FILE.name
                shutil.copy2(overlay.parent / answerer, native / f"turn-{turn.index}.{answerer}")
        self.dsh_home(ctx).mkdir(parents=True, exist_ok=True)
        return (sdk_profile.launch_argv(runtime, [overlay] if overlay is not None else []),
                self.profile_environment(ctx), handlers)

    def _start(self, ctx: RunContext, turn: TurnContext, files: TurnFiles, deadline: float) -> tuple[Runtime | None, str | None]:
        found = self.surface()
        if found.kind == "profile":
            assert found.runtime is not None
            command, env, handlers = self._profile_launch(ctx, turn, found.runtime)
        else:
            paths = self.runtime()
            if paths is None:
                hint = install_version_hint(self.name, self.release) if self.release else self.install_hint
                return None, f"DeepSeek Harness runtime not found; {hint}"
            binary, bundled = paths
            cordis, handlers = self.config(ctx, bundled)
            self.session_root(ctx).mkdir(parents=True, exist_ok=True)
            env = self.environment(ctx, cordis)
            native = ctx.paths.native
            shutil.copy2(cordis, native / f"turn-{turn.index}.cordis.yml")
            if handlers:
                shutil.copy2(cordis.parent / PROVIDER_FILE.name, native / f"turn-{turn.index}.{PROVIDER_FILE.name}")
            command = [str(binary)]
        write_invocation(ctx.paths.native / f"turn-{turn.index}.invocation.json", command, env, ctx)
        assert files.requests is not None and files.stderr is not None
        from apparatus.sandbox import current

        # The cell's sandbox confines the runtime like any harness process; its stdin carries
        # the JSON-RPC requests, so the sandbox must pass stdin through.
        conf = current()
        argv = conf.wrap(command, cwd=ctx.workspace, env=env, stdin=True) if conf else command
        try:
            runtime = Runtime(argv, env=env, cwd=ctx.workspace, stdout=files.stdout,
                              stderr=files.stderr, requests=files.requests,
                              reap=conf.sandbox.reap if conf else None, handlers=handlers)
        except OSError as exc:
            return None, f"could not start the DeepSeek Harness runtime: {exc}"
        rid = runtime.send("initialize", {"cwd": str(ctx.workspace), "provider": PROVIDER, "model": ctx.model})
        answer = runtime.response(rid, min(deadline, time.monotonic() + INIT_TIMEOUT_S))
        if answer is None or "error" in answer:
            why = "no answer" if answer is None else json.dumps(answer.get("error"))
            runtime.kill()
            return None, f"DeepSeek Harness runtime initialize failed: {why}"
        return runtime, None

    def run_turn(self, ctx: RunContext, turn: TurnContext) -> TurnOutcome:
        started = time.monotonic()
        deadline = started + max(1.0, turn.deadline_s)
        native = ctx.paths.native
        native.mkdir(parents=True, exist_ok=True)
        (files,) = turn_files(native, [turn.index], requests=True)
        assert files.stderr is not None and files.requests is not None
        for path in (files.stdout, files.stderr, files.requests):
            path.touch()

        def outcome(code: int | None, error: str | None = None, timed_out: bool = False) -> TurnOutcome:
            proc = ProcessOutcome(code, timed_out, time.monotonic() - started, error)
            return turn_outcome(turn.index, proc, files, ctx.session_id, "the DeepSeek Harness runtime")

        runtime = self._live.get(ctx.run_id)
        if runtime is not None and not runtime.alive:
            runtime.kill()
            runtime = None
            self._live.pop(ctx.run_id, None)
        if runtime is None:
            runtime, error = self._start(ctx, turn, files, deadline)
            if runtime is None:
                return outcome(None, error)
            self._live[ctx.run_id] = runtime
        else:
            runtime.route(files.stdout, files.stderr, files.requests)
        if turn.starts_session(ctx.session_id):
            ctx.session_id = f"session-tt-{uuid.uuid4().hex}"
        session = ctx.session_id
        assert session is not None  # a turn without a session id yet starts one
        mark = len(runtime.messages)
        rid = runtime.send("session/prompt",
                           {"sessionId": session, "contentBlocks": [{"type": "text", "text": turn.user_text}]})
        answer = runtime.response(rid, deadline)
        if answer is not None and "error" in answer:
            return outcome(1, f"session/prompt refused: {json.dumps(answer.get('error'))}")
        message_id = _obj(_obj(answer).get("result")).get("messageId")

        def idle_after_receipt(ms: list[dict[str, Any]]) -> int | None:
            receipt = None
            for i in range(mark, len(ms)):
                m = ms[i]
                params = _obj(m.get("params"))
                if params.get("sessionId") != session:
                    continue
                if receipt is None:
                    event = _obj(params.get("event"))
                    data = _obj(event.get("data"))
                    inserted = data["inserted"] if isinstance(data.get("inserted"), list) else []
                    if event.get("type") == "agent/inbox/spliced" and any(
                        isinstance(x, dict) and x.get("id") == message_id for x in inserted
                    ):
                        receipt = i
                elif m.get("method") == "session.status" and params.get("status") == "idle":
                    return receipt + 1  # +1: never falsy
            return None

        done = runtime.wait_for(idle_after_receipt, deadline) if message_id else None
        if done is None:
            if time.monotonic() >= deadline:
                runtime.kill()
                self._live.pop(ctx.run_id, None)
                return outcome(None, f"wall clock of {turn.deadline_s:.0f}s exceeded; runtime process group killed",
                               timed_out=True)
            code = runtime.proc.poll()
            runtime.kill()
            self._live.pop(ctx.run_id, None)
            return outcome(None, f"DeepSeek Harness runtime ended before the turn finished (exit status {code})")
        kind = _turn_status(runtime.messages, session, done - 1)
        if kind == "completed":
            return outcome(0)
        return outcome(1, f"turn ended with reason {kind!r}" if kind else "the turn ended without a turn/end event")

    # -------------------------------------------------------------------------- collect
    def collect(self, ctx: RunContext) -> list[Path]:
        """Shut the runtime down (its last words go to the last turn's files), then archive
        every session folder of ``DSH_SESSION_ROOT`` to ``native/sessions/<session>/``: the
        zstd session log verbatim plus a decompressed ``session.jsonl`` beside it."""
        runtime = self._live.pop(ctx.run_id, None)
        if runtime is not None:
            runtime.shutdown()
        copied: list[Path] = []
        if self.surface().kind == "profile":
            # 0.2.x: $DSH_HOME/sessions/<cwd slug>/<session>/session.v<format>.jsonl.zstd
            root, pattern = self.dsh_home(ctx) / "sessions", "*/*/session*.jsonl.zstd"
        else:
            root, pattern = self.session_root(ctx), "*/*/session.jsonl.zstd"
        if not root.is_dir():
            return copied
        # the session root and TMPDIR are agent-writable: records only, no symlink followed
        for log in sorted(root.glob(pattern)):
            if not is_record(log, ctx.home) or not is_record_folder(log.parent, ctx.home):
                continue
            dest = ctx.paths.native / "sessions" / log.parent.name
            dest.mkdir(parents=True, exist_ok=True)
            copied += collect_records(log.parent, dest)
            text = zstd_decompress(log)
            if text is not None:
                plain = dest / log.name.removesuffix(".zstd")
                plain.write_bytes(text)
                copied.append(plain)
        # Full outputs of truncated bash results ("[output truncated; full output: <path>]"),
        # written by the runtime's subprocess plugin under TMPDIR.
        for spill in sorted((ctx.home / "tmp").glob("dsh-subprocess-*/*")):
            kept = copy_record(spill, ctx.paths.native / "spill" / spill.parent.name / spill.name, ctx.home)
            if kept is not None:
                copied.append(kept)
        return copied

    def normalize(self, paths: RunPaths, outcomes: list[TurnOutcome], run_id: str) -> NormalizedTrace:
        turns = turn_files(paths.native, [o.index for o in outcomes], requests=True)
        return normalize(turns, paths.native / "sessions", run_id, at=recorded_time(outcomes))


def zstd_decompress(path: Path) -> bytes | None:
    """The decompressed bytes of a zstd file (``zstandard`` if importable, else the ``zstd`` CLI)."""
    try:
        import zstandard  # type: ignore[import-not-found]

        with path.open("rb") as fh:
            return bytes(zstandard.ZstdDecompressor().stream_reader(fh).read())
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - a corrupt archive stays compressed (kept verbatim)
        return None
    zstd = shutil.which("zstd")
    if zstd is None:
        return None
    out = subprocess.run([zstd, "-dc", str(path)], capture_output=True, timeout=60, check=False)
    return out.stdout if out.returncode == 0 else None
