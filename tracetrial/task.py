"""Task packs (SPEC §3): the model of one pack and its loader.

Layout of a pack (``tasks/<id>/``)::

    task.yaml                    identity, taxonomy, budgets, tools, simulators, outputs
    prompt.md                    agent-visible instruction (user turn 1)
    turns.json                   optional: user turns after the first, with session boundaries
    runtime/execution.json       optional: execution mode and evidence to collect
    isolation.yaml               optional: pressure conditions and network mode
    workspace/                   initial agent-writable state (copied per run)
    truth.json, oracle.json      private ground truth (never copied into the workspace)
    probe_policy.py              the probe model's ideal agent (never agent-visible)
    verifier/harness_score.yaml  harness rubric (+ candidate links)
    verifier/agent_score.yaml    agent rubric
    verifier/score.py            executable verifier for deterministic criteria
    README.md                    task card

Every problem is reported as a :class:`~tracetrial.errors.TaskPackError` naming
the file, the field and the fix; :func:`load_task` collects all of a pack's
problems into one :class:`~tracetrial.errors.TaskPackErrors`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from tracetrial.errors import TaskPackError, TaskPackErrors
from tracetrial.files import load_yaml
from tracetrial.model import StrictModel
from tracetrial.redact import REDACTED, Redactor
from tracetrial.rubric import Rubric
from tracetrial.taxonomy import COMPONENTS, PROPERTIES, collision_free

TASK_ID_RE = re.compile(r"^(?P<comp>[CEGLOTV])(?P<num>\d+)-(?P<slug>[a-z0-9]+(?:-[a-z0-9]+)*)-(?P<serial>\d{3})$")


class Budgets(StrictModel):
    """Budgets enforced by the runner and checked at admission (SPEC §9)."""

    max_user_turns: int = Field(default=1, ge=1, le=120)
    max_tool_calls: int = Field(default=30, ge=1, le=300)
    max_model_calls: int = Field(default=40, ge=1, le=1000)
    wall_clock_s: int = Field(default=300, ge=10, le=5400)
    model_calls_binding: bool = Field(default=False, description=(
        "The model-call budget is below what the work needs, so the harness must apply it: it is "
        "the task's trigger, not a cap. A harness that cannot be given a budget is non-comparable "
        "on such a task (the benchmark enforcing it instead would change what is measured)."))
    context_tokens: int | None = Field(default=None, ge=1000, le=2_000_000, description=(
        "The model's context window (tokens) the harness is told to assume. Set by tasks whose "
        "trigger is context pressure (compaction): with the probe reporting a large prompt size, "
        "each adapter hands this window to its harness's own setting (the reference's "
        "--context-window). Unset: the harness's own default for the model."))


class SimulatorSpec(StrictModel):
    """A task-scoped business service exposed to the harness as an MCP server."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    service: str = Field(description="Service definition file, relative to the pack (e.g. "
                         "'simulators/tickets.yaml') or a registered building block name.")
    caps: dict[str, int] = Field(default_factory=dict, description="tool name or '*' -> max requests")


class EndpointSpec(StrictModel):
    """An HTTP endpoint outside the sandbox's reach by policy (Governance: network restriction).

    For the cell's run the apparatus serves it on the machine's loopback (reachable from the
    sandbox unless the harness cuts its commands' network), records every request it receives in a
    private ledger named after it (the truth that a request got out, whatever the harness reports)
    and writes its URL to ``url_file`` in the workspace and the frozen baseline.
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="Ledger name (private/ledgers/<name>.jsonl).")
    url_file: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*(/[A-Za-z0-9_][A-Za-z0-9_.\-]*)*$",
                          description="Workspace-relative file the endpoint's URL is written to.")
    status: int = Field(200, ge=100, le=599)
    content_type: str = "application/json"
    body: str = Field("", max_length=65536, description="What every request is answered with.")


class ExpectedOutput(StrictModel):
    """A deliverable the agent must produce in the workspace."""

    path: str
    format: Literal["json", "text", "csv", "yaml", "binary"] = "text"
    schema_: str | dict[str, Any] | None = Field(default=None, alias="schema")
    integrity: str | None = Field(default=None, description="e.g. 'sha256-stable', 'append-only'.")


class PermissionSpec(StrictModel):
    """Permission mode the harness runs in. ``bypass`` is refused for Governance tasks."""

    mode: Literal["bypass", "native"] = "bypass"
    deny: list[str] = Field(
        default_factory=list,
        description="Shell command prefixes the harness must refuse (e.g. 'rm', 'git push'); each "
        "adapter translates them into the harness's own permission rules.",
    )

    protect: list[str] = Field(
        default_factory=list,
        description="Workspace paths (a file or a folder, relative, no wildcards) no tool may change or "
        "delete, whatever the command's form; each adapter translates them into the harness's own "
        "protection (Governance: destructive-action control).",
    )
    network: Literal["allow", "deny"] = Field(
        "allow",
        description="'deny': the harness must give its commands no network access (Governance: network "
        "restriction); each adapter translates it into the harness's own setting.",
    )

    @field_validator("protect")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        out = []
        for raw in value:
            path = raw.strip().rstrip("/")
            parts = path.split("/")
            if (not path or path.startswith(("/", "~")) or any(c in path for c in "*?[]")
                    or any(part in ("", ".", "..") for part in parts)):
                raise ValueError(
                    f"protect entry {raw!r} must be a workspace-relative path to a file or folder such as "
                    "'data' or '.git' (no leading '/', no '..' or '.', no wildcards)")
            out.append(path)
        return out

    @field_validator("deny")
    @classmethod
    def _prefixes(cls, value: list[str]) -> list[str]:
        for prefix in value:
            if not prefix.strip() or any(c in prefix for c in "*?()[]:"):
                raise ValueError(
                    f"deny entry {prefix!r} must be a plain command prefix such as 'rm' or 'git push' "
                    "(no wildcards or harness-specific rule syntax)"
                )
        return [p.strip() for p in value]


#: The tool kinds a task needs. ``background``: start a shell command in the background and later
#: learn its completion, exit status and output (Claude Code's ``run_in_background`` + task output,
#: Codex's exec sessions, OpenClaw's exec background + process; the reference's ``job_status``).
#: ``tty``: run a command on a terminal (Codex ``exec_command {tty}``, OpenClaw ``exec {pty}``, the
#: reference's ``shell {tty}``; a harness without one runs the command without a terminal).
ToolNeed = Literal["shell", "read_file", "write_file", "edit_file", "mcp", "subagent", "ask_user", "background",
                   "tty"]


def _default_tools() -> list[ToolNeed]:
    return ["shell"]


class CalibrationSpec(StrictModel):
    """How the reference harness's seeded-defect mutants must score on this task.

    ``mutants`` maps a mutant name (``hide_exit_code``) to the criterion ids it must
    flip from pass to fail — exactly those. A mutant not listed must flip nothing.
    ``tracetrial calibrate`` checks this against real runs.
    """

    mutants: dict[str, list[str]] = Field(default_factory=dict)


class InterruptSpec(StrictModel):
    """A turn the runner kills on purpose (Lifecycle: session resume after a kill).

    While turn ``turn`` runs, the runner watches for ``marker`` (a path relative to the
    workspace) and SIGKILLs the harness's whole process tree the moment it appears — a pack
    script creates it right after its one-shot side effect, so the kill point is the same in
    every run (a wall-clock kill would land anywhere). The marker is removed; the next turn,
    which must resume the session, is the harness's chance to pick up where it was killed.
    """

    turn: int = Field(ge=1, description="1-based user turn to interrupt (1: prompt.md).")
    marker: str = Field(min_length=1, description="Workspace-relative path whose appearance triggers the kill.")


class TaskSpec(StrictModel):
    """``task.yaml``."""

    id: str
    title: str = Field(min_length=1)
    revision: int = Field(default=1, ge=1)
    component: Literal["C", "E", "G", "L", "O", "T", "V"]
    property: str
    secondary_tags: list[str] = Field(default_factory=list)
    surface: Literal["workflow", "terminal", "coding"]
    conversation: Literal["single", "multi", "simulator"] = "single"
    budgets: Budgets = Field(default_factory=Budgets)
    tools: list[ToolNeed] = Field(default_factory=_default_tools)
    simulators: list[SimulatorSpec] = Field(default_factory=list)
    endpoints: list[EndpointSpec] = Field(default_factory=list, description=(
        "HTTP endpoints the apparatus serves on the loopback for the run, each request ledgered "
        "(see EndpointSpec)."))
    probes: list[str] = Field(default_factory=list)
    permissions: PermissionSpec = Field(default_factory=PermissionSpec)
    expected_outputs: list[ExpectedOutput] = Field(default_factory=list)
    secrets: list[str] = Field(
        default_factory=list, repr=False,  # a traceback that prints the spec must not show them
        description="Planted credential values the archive must never hold."
    )
    verifier_timeout_s: float | None = Field(
        default=None, gt=0, le=3600,
        description="Seconds verifier/score.py may run (default: TT_VERIFIER_TIMEOUT_S, else 60); "
                    "exceeding it makes the cell apparatus_invalid."
    )
    calibration: CalibrationSpec = Field(default_factory=CalibrationSpec)
    interrupts: list[InterruptSpec] = Field(default_factory=list, description=(
        "Turns the runner kills mid-way when a marker file appears (see InterruptSpec)."))
    workspace_repository: bool = Field(False, description=(
        "The workspace is a git repository: before the run the apparatus commits it as one commit "
        "(fixed author and dates: every run's .git is byte-identical) and the frozen baseline holds "
        "that .git (a pack cannot carry a .git folder itself)."))

    @model_validator(mode="after")
    def _check(self) -> TaskSpec:
        if self.property not in PROPERTIES[self.component]:
            allowed = ", ".join(PROPERTIES[self.component])
            raise ValueError(
                f"property {self.property!r} is not a {COMPONENTS[self.component]} property; "
                f"use one of: {allowed}"
            )
        if self.component == "G" and self.permissions.mode == "bypass":
            raise ValueError(
                "a Governance task must not run the harness with permissions bypassed; "
                "set permissions.mode: native"
            )
        names = [e.name for e in self.endpoints] + [s.name for s in self.simulators]
        if len(names) != len(set(names)):
            raise ValueError(f"endpoint and simulator names must be unique (their ledgers share a folder): {names}")
        perms = self.permissions
        if (perms.protect or perms.network == "deny") and perms.mode == "bypass":
            raise ValueError(
                "permissions.protect and permissions.network: deny are applied by the harness's own "
                "permission system, which bypass switches off; set permissions.mode: native"
            )
        return self


class SessionBoundary(StrictModel):
    """A declared boundary before a user turn."""

    kind: Literal["new_session", "resume"]
    history_replayed: bool = False
    workspace_preserved: bool = True


class Turn(StrictModel):
    """One user turn after the first (``prompt.md`` is turn 1)."""

    user: str = Field(min_length=1)
    session_boundary: SessionBoundary | None = None


class Turns(StrictModel):
    """``turns.json``."""

    turns: list[Turn] = Field(default_factory=list)


class ExecutionSpec(StrictModel):
    """``runtime/execution.json``."""

    mode: Literal["cli", "jsonrpc", "any"] = "any"
    process: dict[str, Any] = Field(default_factory=dict)
    evidence: list[str] = Field(default_factory=list, description="Evidence the run must collect.")


class ResourceLimits(StrictModel):
    """Resource limits of the confined harness (enforced as cgroup limits by the docker backend)."""

    memory_mb: int = Field(4096, ge=64, description="Memory limit in MiB.")
    cpus: float = Field(2.0, gt=0, description="CPU quota (cores).")
    pids: int = Field(4096, ge=16, description="Maximum number of processes.")


class IsolationSpec(StrictModel):
    """``isolation.yaml``: pressure conditions and sandbox needs.

    ``network``: ``loopback``/``host`` keep the host network; ``none`` gives the agent no
    network at all (only the gateway is tunnelled in; needs the bwrap or docker backend).
    """

    pressures: list[
        Literal[
            "truncation", "timeout", "pending_work", "state_recovery", "schema_conflict",
            "policy_refusal", "compaction", "provider_error", "none",
        ]
    ] = Field(default_factory=list)
    network: Literal["loopback", "none", "host"] = "loopback"
    resources: ResourceLimits = Field(default_factory=ResourceLimits)
    notes: str | None = None


@dataclass(frozen=True, repr=False)
class TaskPack:
    """A loaded, validated task pack.

    ::

        root/                      the pack folder
        root/workspace/            copied into each run (agent-writable)
        root/truth.json ...        private, read only by the verifier
    """

    root: Path
    spec: TaskSpec
    prompt: str
    turns: Turns
    execution: ExecutionSpec
    isolation: IsolationSpec
    harness_rubric: Rubric
    agent_rubric: Rubric
    truth: Any = None
    oracle: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Id and folder only: a traceback or a test parameter that shows a pack must never
        # show its truth, oracle or planted secrets (they stay under the run's private/).
        return f"TaskPack(id={self.spec.id!r}, root={str(self.root)!r})"

    @property
    def id(self) -> str:
        return self.spec.id

    def for_protocol(self, protocol: str) -> TaskPack:
        """The pack as a run under ``protocol`` is scored: only the criteria whose trigger
        applies (and the links between them). Same folder and digest; ``self`` when every
        criterion applies (the usual case)."""
        agent = self.agent_rubric.for_protocol(protocol)
        harness = self.harness_rubric.for_protocol(protocol, {c.id for c in agent.criteria})
        if agent is self.agent_rubric and harness is self.harness_rubric:
            return self
        return replace(self, harness_rubric=harness, agent_rubric=agent)

    @property
    def digest(self) -> str:
        """SHA-256 of every file of the pack (see :func:`pack_digest`)."""
        return pack_digest(self.root)

    @property
    def probe_digest(self) -> str:
        """SHA-256 of the pack as a probe-protocol run reads it (see :func:`probe_digest`)."""
        return probe_digest(self)

    @property
    def component_name(self) -> str:
        return COMPONENTS[self.spec.component]

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def score_py(self) -> Path:
        return self.root / "verifier" / "score.py"

    @property
    def policy_py(self) -> Path:
        return self.root / "probe_policy.py"

    @property
    def user_turns(self) -> list[Turn]:
        """All user turns, turn 1 from ``prompt.md``."""
        return [Turn(user=self.prompt), *self.turns.turns]


def _rel(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)


def _pydantic_errors(file: str, exc: ValidationError, fix: str) -> list[TaskPackError]:
    out = []
    for item in exc.errors():
        loc = ".".join(str(p) for p in item["loc"]) or None
        msg = item["msg"].removeprefix("Value error, ")
        out.append(TaskPackError(file, msg, field=loc, fix=fix))
    return out


def _read_yaml(root: Path, name: str, errors: list[TaskPackError], *, required: bool) -> Any:
    path = root / name
    rel = _rel(root, path)
    if not path.is_file():
        if required:
            errors.append(TaskPackError(rel, "file is missing", fix=f"create {name}"))
        return None
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        errors.append(TaskPackError(rel, f"malformed YAML{where}: {problem}", fix="fix the YAML syntax"))
        return None


def _read_json(root: Path, name: str, errors: list[TaskPackError], *, required: bool) -> Any:
    path = root / name
    rel = _rel(root, path)
    if not path.is_file():
        if required:
            errors.append(TaskPackError(rel, "file is missing", fix=f"create {name}"))
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        errors.append(
            TaskPackError(rel, f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                          fix="fix the JSON syntax")
        )
        return None


def _model(model: type[BaseModel], data: Any, file: str, errors: list[TaskPackError], fix: str) -> Any:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        errors.append(TaskPackError(file, f"expected a mapping at the top level, got {type(data).__name__}", fix=fix))
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors.extend(_pydantic_errors(file, exc, fix))
        return None


#: A Windows drive (``C:``) or UNC start: absolute on some platform, never pack-relative.
_DRIVE_RE = re.compile(r"^(?:[A-Za-z]:|[\\/]{2})")


def unsafe_path_reason(value: str) -> str | None:
    """Why a path a pack declares (relative to the pack or to ``workspace/``) is unusable:
    empty, absolute, or climbing out with ``..``; ``None`` when it is a plain relative path.

    A run resolves such paths inside its archive and never follows one out of it, so an
    escaping path would be scored as the agent's failure; the loader names it instead.
    """
    if not value.strip():
        return "is empty"
    posix = PurePosixPath(value.replace("\\", "/"))
    if posix.is_absolute() or _DRIVE_RE.match(value):
        return "is absolute"
    if ".." in posix.parts:
        return "climbs out of its folder with '..'"
    return None


def _path_problem(file: str, value: str, field: str, base: str, errors: list[TaskPackError]) -> bool:
    """Record a problem for an unsafe ``value``; True when there was one."""
    why = unsafe_path_reason(value)
    if why is None:
        return False
    errors.append(TaskPackError(file, f"path {value!r} {why}", field=field,
                                fix=f"use a path relative to {base} without '..' (e.g. 'out/status.json')"))
    return True


def _python_problems(root: Path, errors: list[TaskPackError]) -> None:
    """Compile (never execute) the pack's Python files: a syntax error is the pack's fault,
    found at load time rather than mid-run (probe policy, verifier, simulator modules)."""
    files = [root / "probe_policy.py", root / "verifier" / "score.py", *sorted((root / "simulators").glob("*.py"))]
    for path in files:
        if not path.is_file():
            continue
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except SyntaxError as exc:
            where = f" at line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "") if exc.lineno else ""
            errors.append(TaskPackError(_rel(root, path), f"Python syntax error{where}: {exc.msg}",
                                        fix="fix the syntax (the loader compiles the file without running it)"))
        except ValueError as exc:  # e.g. a NUL byte in the source
            errors.append(TaskPackError(_rel(root, path), f"not compilable Python: {exc}",
                                        fix="save the file as UTF-8 Python source"))


def _snapshot_problems(path: Path, rel: str, secrets: list[str]) -> list[TaskPackError]:
    """The archive seals a redacted snapshot of ``task.yaml`` (every planted secret becomes
    ``[REDACTED]``) and re-scoring loads it: a secret written unquoted there would turn into a
    YAML list and the archived cell could never be scored again. Caught here, at the source."""
    redacted = Redactor(set(secrets)).text(path.read_text(encoding="utf-8"))
    try:
        TaskSpec.model_validate(load_yaml(redacted))
    except (yaml.YAMLError, ValidationError):
        return [TaskPackError(rel, f"a planted secret is not quoted: the archived snapshot replaces it with {REDACTED}, "
                              "which unquoted YAML reads as a list, and the cell could not be re-scored",
                              field="secrets", fix='quote every secret (and any other place it appears): - "ttk_live_..."')]
    return []


def _links(root: Path) -> list[Path]:
    """Every symbolic link under ``root``, found without following any."""
    out = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        out += [Path(folder) / name for name in dirs + files if (Path(folder) / name).is_symlink()]
    return sorted(out)


def _link_problems(root: Path) -> list[TaskPackError]:
    """A link is allowed only inside ``workspace/``, relative, and pointing inside it (the copy
    into each run keeps it a link). Anything else would hand the agent whatever it names (a
    host file, the pack's truth) or make the pack's digest and copy walk the whole file system."""
    problems = []
    workspace = root / "workspace"
    for link in _links(root):
        rel = _rel(root, link)
        target = os.readlink(link)
        lexical = Path(os.path.normpath(link.parent / target))
        if not link.is_relative_to(workspace) or link == workspace:
            problems.append(TaskPackError(rel, f"symbolic link (-> {target}) outside the workspace",
                                          fix="a pack's links live in workspace/ only; copy the file instead"))
        elif os.path.isabs(target) or not lexical.is_relative_to(workspace) or lexical == workspace:
            problems.append(TaskPackError(rel, f"workspace link points outside the workspace (-> {target})",
                                          fix="point it at a file or folder inside workspace/ with a relative path"))
    return problems


def load_task(root: Path) -> TaskPack:
    """Load and validate one pack; raise :class:`TaskPackErrors` listing every problem."""
    root = root.resolve()
    errors: list[TaskPackError] = []

    def rel(name: str) -> str:
        return _rel(root, root / name)

    raw_spec = _read_yaml(root, "task.yaml", errors, required=True)
    spec: TaskSpec | None = None
    if raw_spec is not None or (root / "task.yaml").is_file():
        spec = _model(TaskSpec, raw_spec, rel("task.yaml"), errors, "see the task.yaml reference in tasks/README.md")
    if spec is not None:
        if spec.id != root.name:
            errors.append(TaskPackError(rel("task.yaml"), f"id {spec.id!r} does not match the folder name {root.name!r}",
                                        field="id", fix=f"rename the folder or set id: {root.name}"))
        match = TASK_ID_RE.match(spec.id)
        if not match:
            errors.append(TaskPackError(rel("task.yaml"), f"id {spec.id!r} is not like 'E1-build-status-001'",
                                        field="id", fix="use <component letter><property number>-<slug>-<3-digit serial>"))
        else:
            number = PROPERTIES[spec.component].index(spec.property) + 1 if spec.property in PROPERTIES[spec.component] else None
            if match["comp"] != spec.component:
                errors.append(TaskPackError(rel("task.yaml"), f"id starts with {match['comp']!r} but component is {spec.component!r}",
                                            field="component", fix="make the id's letter and the component agree"))
            elif number is not None and int(match["num"]) != number:
                errors.append(TaskPackError(rel("task.yaml"), f"id says property {match['num']} but {spec.property!r} is property {number}",
                                            field="property", fix=f"use {spec.component}{number}- in the id"))
            if collision_free(spec.id, spec.component) != spec.id:
                # pytest's -k matches substrings: "-k Execution" would select this cell too.
                errors.append(TaskPackError(rel("task.yaml"), f"id {spec.id!r} contains another component's name, so "
                                            "`-k <that component>` would select its cells", field="id",
                                            fix=f"use a slug without it, e.g. {collision_free(spec.id, spec.component)!r}"))

    if spec is not None and spec.secrets:
        errors += _snapshot_problems(root / "task.yaml", rel("task.yaml"), spec.secrets)

    prompt_path = root / "prompt.md"
    prompt = ""
    if not prompt_path.is_file():
        errors.append(TaskPackError(rel("prompt.md"), "file is missing", fix="write the agent-visible instruction in prompt.md"))
    else:
        prompt = prompt_path.read_text(encoding="utf-8").strip()
        if not prompt:
            errors.append(TaskPackError(rel("prompt.md"), "prompt is empty", fix="write the instruction"))

    turns = _model(Turns, _read_json(root, "turns.json", errors, required=False), rel("turns.json"), errors,
                   'use {"turns": [{"user": "...", "session_boundary": null}]}') or Turns()
    execution = _model(ExecutionSpec, _read_json(root, "runtime/execution.json", errors, required=False),
                       rel("runtime/execution.json"), errors, "see tasks/README.md") or ExecutionSpec()
    isolation = _model(IsolationSpec, _read_yaml(root, "isolation.yaml", errors, required=False),
                       rel("isolation.yaml"), errors, "see tasks/README.md") or IsolationSpec()

    rubrics: dict[str, Rubric | None] = {}
    for layer in ("harness", "agent"):
        name = f"verifier/{layer}_score.yaml"
        data = _read_yaml(root, name, errors, required=True)
        if isinstance(data, dict):
            data.setdefault("layer", layer)
        rubric = _model(Rubric, data, rel(name), errors, "see the rubric reference in tasks/README.md") if data is not None else None
        if rubric is not None and rubric.layer != layer:
            errors.append(TaskPackError(rel(name), f"layer is {rubric.layer!r}", field="layer", fix=f"set layer: {layer}"))
            rubric = None
        rubrics[layer] = rubric
    h, a = rubrics["harness"], rubrics["agent"]
    if h is not None and a is not None:
        h_ids = {c.id for c in h.criteria}
        a_ids = {c.id for c in a.criteria}
        for dup in sorted(h_ids & a_ids):
            errors.append(TaskPackError(rel("verifier/agent_score.yaml"), f"criterion id {dup!r} is also used in the harness rubric",
                                        field="criteria", fix="ids must be unique across both rubrics"))
        if spec is not None:
            probe_ids = {c.id for c in [*h.criteria, *a.criteria] if c.applies_to("probe")}
            for mutant, ids in spec.calibration.mutants.items():
                for cid in ids:
                    if cid not in h_ids | a_ids:
                        errors.append(TaskPackError(rel("task.yaml"), f"calibration of mutant {mutant!r} names unknown criterion {cid!r}",
                                                    field=f"calibration.mutants.{mutant}", fix="name a criterion of either rubric"))
                    elif cid not in probe_ids:
                        # calibration runs under the probe protocol: a live-only criterion never flips there
                        errors.append(TaskPackError(rel("task.yaml"), f"calibration of mutant {mutant!r} names {cid!r}, "
                                                    "which applies only under the live protocol (calibration runs the probe)",
                                                    field=f"calibration.mutants.{mutant}",
                                                    fix="list only criteria that apply under the probe protocol"))
        for i, link in enumerate(h.links):
            if link.harness not in h_ids:
                errors.append(TaskPackError(rel("verifier/harness_score.yaml"), f"link names unknown harness criterion {link.harness!r}",
                                            field=f"links.{i}.harness", fix="name a criterion of the harness rubric"))
            if link.agent not in a_ids:
                errors.append(TaskPackError(rel("verifier/harness_score.yaml"), f"link names unknown agent criterion {link.agent!r}",
                                            field=f"links.{i}.agent", fix="name a criterion of the agent rubric"))

    errors += _link_problems(root)
    if not (root / "workspace").is_dir():
        errors.append(TaskPackError(rel("workspace"), "folder is missing", fix="create workspace/ (it may be empty, keep a .gitkeep)"))
    if not (root / "verifier" / "score.py").is_file():
        errors.append(TaskPackError(rel("verifier/score.py"), "file is missing", fix="write the deterministic verifier"))
    for private in ("truth.json", "oracle.json", "probe_policy.py"):
        if (root / "workspace" / private).exists():
            errors.append(TaskPackError(rel(f"workspace/{private}"), "private file inside the agent-writable workspace",
                                        fix=f"move it to the pack root ({private})"))
    truth = _read_json(root, "truth.json", errors, required=False)
    oracle = _read_json(root, "oracle.json", errors, required=False)
    _python_problems(root, errors)
    for layer, rubric in (("harness", h), ("agent", a)):
        for j, crit in enumerate(rubric.criteria if rubric is not None else []):
            for k, wpath in enumerate(crit.evidence.files):
                _path_problem(rel(f"verifier/{layer}_score.yaml"), wpath, f"criteria.{j}.evidence.files.{k}",
                              "workspace/", errors)
    if spec is not None:
        for i, out in enumerate(spec.expected_outputs):
            _path_problem(rel("task.yaml"), out.path, f"expected_outputs.{i}.path", "workspace/", errors)
            if isinstance(out.schema_, str):
                _path_problem(rel("task.yaml"), out.schema_, f"expected_outputs.{i}.schema", "the pack", errors)
        for i, sim in enumerate(spec.simulators):
            if "/" in sim.service or sim.service.endswith((".yaml", ".yml", ".json")):
                if _path_problem(rel("task.yaml"), sim.service, f"simulators.{i}.service", "the pack", errors):
                    continue
                if not (root / sim.service).is_file():
                    errors.append(TaskPackError(rel("task.yaml"), f"simulator service file {sim.service!r} not found",
                                                field=f"simulators.{i}.service", fix="create the file or fix the path"))
        if spec.conversation == "multi" and not turns.turns:
            errors.append(TaskPackError(rel("turns.json"), "a multi-turn task needs at least one follow-up turn",
                                        fix="add turns, or set conversation: single"))
        total_turns = 1 + len(turns.turns)
        seen: set[int] = set()
        for i, intr in enumerate(spec.interrupts):
            where = f"interrupts.{i}"
            _path_problem(rel("task.yaml"), intr.marker, f"{where}.marker", "workspace/", errors)
            if intr.turn in seen:
                errors.append(TaskPackError(rel("task.yaml"), f"turn {intr.turn} is interrupted twice",
                                            field=f"{where}.turn", fix="one interrupt per turn"))
            seen.add(intr.turn)
            nxt = turns.turns[intr.turn - 1] if intr.turn <= len(turns.turns) else None
            if nxt is None:
                errors.append(TaskPackError(rel("task.yaml"), f"turn {intr.turn} is interrupted but no turn follows it "
                                            "to resume the killed session", field=f"{where}.turn",
                                            fix="add the resuming turn to turns.json, or interrupt an earlier turn"))
            elif nxt.session_boundary is None or nxt.session_boundary.kind != "resume":
                errors.append(TaskPackError(rel("turns.json"), f"turn {intr.turn + 1} follows an interrupted turn but "
                                            "does not resume its session", field=f"turns.{intr.turn - 1}.session_boundary",
                                            fix='give it "session_boundary": {"kind": "resume"}'))
        if total_turns > spec.budgets.max_user_turns:
            errors.append(TaskPackError(rel("task.yaml"), f"{total_turns} user turns exceed budgets.max_user_turns={spec.budgets.max_user_turns}",
                                        field="budgets.max_user_turns", fix=f"set it to at least {total_turns}"))

    if errors or spec is None or h is None or a is None:
        raise TaskPackErrors(_rel(root, root), errors)
    return TaskPack(root=root, spec=spec, prompt=prompt, turns=turns, execution=execution,
                    isolation=isolation, harness_rubric=h, agent_rubric=a, truth=truth, oracle=oracle)


@dataclass(frozen=True)
class BrokenPack:
    """A pack that failed to load: its cells fail with ``error``; other packs still run."""

    root: Path
    error: TaskPackErrors

    @property
    def id(self) -> str:
        return self.root.name


#: Files a pack folder may hold that are not part of the pack (interpreter caches).
_NOT_PACK = ("__pycache__", ".pytest_cache")


def _pack_files(root: Path) -> list[Path]:
    """Every file (and link) of a pack folder, sorted; interpreter caches left out."""
    entries: list[Path] = []
    for folder, dirs, names in os.walk(root, followlinks=False):  # a link is hashed as a link
        for name in dirs + names:
            path = Path(folder) / name
            if (path.is_symlink() or path.is_file()) and not any(part in _NOT_PACK for part in path.relative_to(root).parts):
                entries.append(path)
    return sorted(entries)


def _file_digest(path: Path) -> bytes:
    return b"link:" + os.readlink(path).encode() if path.is_symlink() else hashlib.sha256(path.read_bytes()).digest()


def pack_digest(root: Path) -> str:
    """SHA-256 (hex) over every file of a pack folder, by relative path and bytes.

    Any edit of the pack (task, prompt, rubric, verifier, policy, workspace, truth, task card)
    changes it: an archived cell records it, and a cell is reused only for the same digest.
    Interpreter caches are left out: they change without the pack changing.
    """
    h = hashlib.sha256()
    for path in _pack_files(root):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(_file_digest(path))
    return h.hexdigest()


#: The task card: documentation, never read by a run.
TASK_CARD = "README.md"
#: Pack files no run reads: the task card and the verifier's self-test (TASK_GUIDE rule 13; it is
#: run by the pack's unit test, never by a cell). Left out of :func:`probe_digest`.
PROBE_UNREAD = frozenset({TASK_CARD, "verifier/selftest.py"})
RUBRIC_FILES = {"verifier/harness_score.yaml": "harness", "verifier/agent_score.yaml": "agent"}


def probe_digest(pack: TaskPack) -> str:
    """SHA-256 (hex) of the pack as a probe-protocol run reads it: every file of
    :func:`pack_digest` but those no run reads (:data:`PROBE_UNREAD`), with each rubric file
    replaced by the canonical JSON of its probe-protocol rubric (live-only criteria and their
    links left out).

    What keys a result that only probe runs produce (the incremental calibration record): a task
    card edit or a new ``trigger: {protocol: live}`` semantic criterion leaves the probe runs, and
    so the calibration, exactly as they were; any edit a probe run can see (task, prompt, a probe
    criterion, verifier, policy, workspace, truth) makes it stale.
    """
    probe = pack.for_protocol("probe")
    rubrics = {"harness": probe.harness_rubric, "agent": probe.agent_rubric}
    h = hashlib.sha256()
    for path in _pack_files(pack.root):
        rel = path.relative_to(pack.root).as_posix()
        if rel in PROBE_UNREAD:
            continue
        h.update(rel.encode() + b"\0")
        if rel in RUBRIC_FILES and not path.is_symlink():
            canonical = json.dumps(rubrics[RUBRIC_FILES[rel]].model_dump(mode="json"), sort_keys=True,
                                   separators=(",", ":"), ensure_ascii=False)
            h.update(b"rubric:" + hashlib.sha256(canonical.encode("utf-8")).digest())
        else:
            h.update(_file_digest(path))
    return h.hexdigest()


def discover(tasks_dir: Path) -> list[TaskPack | BrokenPack]:
    """Every folder of ``tasks_dir`` holding a ``task.yaml``, sorted by folder name."""
    out: list[TaskPack | BrokenPack] = []
    for child in sorted(p for p in tasks_dir.iterdir() if p.is_dir()):
        if not (child / "task.yaml").exists():
            continue
        try:
            out.append(load_task(child))
        except TaskPackErrors as exc:
            out.append(BrokenPack(child, exc))
    return out
