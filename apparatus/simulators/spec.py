"""The declarative service format (``simulators/<name>.yaml``) and its loader.

See ``apparatus/simulators/README.md`` for the reference with an example. In short::

    description: ...           # server description       version: "2.1"
    instructions: ...          # optional MCP server instructions
    module: tickets.py         # optional Python escape hatch, next to this file
    values:  {<name>: {kind: code, length: 8, ...}}     # one-off values per run (seeded)
    state:   {...}             # initial business state (templated once, may use values)
    tools:
      - name: get_ticket
        description: ...
        input_schema: {type: object, ...}
        output_schema: {...}   # optional
        visible_when: <cond>   # optional: dynamic tool list (state, session)
        cases:                 # first case whose 'when' holds answers; or the case fields inline
          - when: <cond>
            issue:   {<name>: {kind: code, ...}}    # per-call values
            effects: [{set: state.x, value: ...}, {append: ...}, {increment: ...}, {delete: ...}]
            result:  <template>        # structuredContent (+ JSON text unless 'text')
            text:    <template>
            error:   {code: ..., message: ..., data: ...}   # isError result
            large:   {size_kb: 256, tail: "...", line: "..."}
            delay_s: 5
            notify:  [tools_list_changed]
            handler: <function in module>
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import yaml
from jsonschema import SchemaError  # type: ignore[import-untyped,unused-ignore]
from jsonschema.validators import validator_for  # type: ignore[import-untyped,unused-ignore]
from pydantic import Field, PrivateAttr, ValidationError, model_validator

from apparatus.simulators.errors import SimulatorConfigError, TemplateError
from apparatus.simulators.expr import check_condition, check_template, parse_path
from tracetrial.files import load_yaml
from tracetrial.model import StrictModel
from tracetrial.task import SimulatorSpec
from tracetrial.values import ValueSpec

SERVICE_SUFFIXES = (".yaml", ".yml", ".json")

#: Names a template may read, per place (see README "Templates").
STATE_ROOTS = frozenset({"values", "session"})
LISTING_ROOTS = frozenset({"state", "values", "session"})
CALL_ROOTS = frozenset({"args", "state", "before", "values", "issued", "call", "session"})


class ErrorSpec(StrictModel):
    """A structured error: ``isError: true`` with ``{"error": {code, message, data}}``."""

    code: str = Field(min_length=1)
    message: str = Field(min_length=1, description="Template.")
    data: Any = Field(default=None, description="Template; omitted when null.")


class LargeSpec(StrictModel):
    """A large text result: filler lines up to ``size_kb`` KiB, then ``tail`` as the last line."""

    size_kb: int = Field(ge=1, le=65_536)
    tail: str = Field(description="Template: the last line (put the value the task needs here).")
    line: str = Field(default="{n:07d} ledger row {n}: status=ok checksum=pending",
                      description="Filler line; Python format with the 1-based line number n.")


class Effect(StrictModel):
    """One state transition. Exactly one of ``set``/``append``/``increment``/``delete`` (a state path)."""

    set: str | None = None
    append: str | None = None
    increment: str | None = None
    delete: str | None = None
    value: Any = Field(default=None, description="Template for set/append.")
    by: int | float = 1

    @property
    def op(self) -> Literal["set", "append", "increment", "delete"]:
        for name in ("set", "append", "increment", "delete"):
            if getattr(self, name) is not None:
                return name
        raise AssertionError("validated")

    @property
    def path(self) -> str:
        return str(getattr(self, self.op))

    @model_validator(mode="after")
    def _one_op(self) -> Effect:
        ops = [n for n in ("set", "append", "increment", "delete") if getattr(self, n) is not None]
        if len(ops) != 1:
            raise ValueError("an effect has exactly one of set, append, increment, delete "
                             f"(got {ops or 'none'})")
        try:
            parse_path(getattr(self, ops[0]))
        except TemplateError as exc:
            raise ValueError(str(exc)) from exc
        return self


class _Outcome(StrictModel):
    """The fields that say what a call does (a case, or a tool without ``cases``)."""

    issue: dict[str, ValueSpec] = Field(default_factory=dict)
    effects: list[Effect] = Field(default_factory=list)
    result: Any = None
    text: str | None = None
    error: ErrorSpec | None = None
    large: LargeSpec | None = None
    delay_s: float = Field(default=0.0, ge=0, le=3600)
    notify: list[Literal["tools_list_changed"]] = Field(default_factory=list)
    handler: str | None = Field(default=None, description="Function name in the service module.")

    def answers(self) -> bool:
        return any(x is not None for x in (self.result, self.text, self.error, self.large, self.handler))

    def _check_outcome(self) -> None:
        if self.handler is not None:
            clash = [n for n in ("result", "text", "error", "large") if getattr(self, n) is not None]
            clash += [n for n in ("issue", "effects") if getattr(self, n)]
            if clash:
                raise ValueError(f"a handler case cannot also declare {clash}; the handler does that")
        if self.error is not None and (self.result is not None or self.large is not None):
            raise ValueError("a case returns either 'error' or 'result'/'large', not both")


class Case(_Outcome):
    """One branch of a tool: the first case whose ``when`` holds answers the call."""

    when: Any = Field(default=None, description="Condition; absent means always.")

    @model_validator(mode="after")
    def _check(self) -> Case:
        self._check_outcome()
        if not self.answers():
            raise ValueError("a case needs one of result, text, error, large or handler")
        return self


class ToolSpec(_Outcome):
    """One MCP tool of the service."""

    name: str = Field(min_length=1, max_length=128)
    title: str | None = None
    description: str = Field(default="", description="Template (values, state, session).")
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    validate_input: bool = Field(default=True, description="Validate arguments against input_schema.")
    visible_when: Any = Field(default=None, description="Condition on state/values/session.")
    cases: list[Case] | None = None
    _cases: list[Case] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> ToolSpec:
        for label, schema in (("input_schema", self.input_schema), ("output_schema", self.output_schema)):
            if schema is None:
                continue
            if schema.get("type") != "object":
                raise ValueError(f"{label} must have type: object at the root (MCP requires it)")
            try:
                validator_for(schema).check_schema(schema)
            except SchemaError as exc:
                raise ValueError(f"{label} is not a valid JSON Schema: {exc.message}") from exc
        inline = self.model_fields_set & set(_Outcome.model_fields)
        if self.cases is not None:
            if inline:
                raise ValueError(f"declare the outcome either inline or under 'cases', not both "
                                 f"(inline: {sorted(inline)})")
            if not self.cases:
                raise ValueError("'cases' is empty")
        else:
            self._check_outcome()
            if not self.answers():
                raise ValueError("a tool needs 'cases' or one of result, text, error, large, handler")
        self._cases = self.cases if self.cases is not None else [
            Case(**self.model_dump(include=set(_Outcome.model_fields), exclude_unset=True))]
        return self

    def effective_cases(self) -> list[Case]:
        """``cases``, or the inline outcome as one unconditional case."""
        return self._cases


class ServiceSpec(StrictModel):
    """A service definition file."""

    description: str | None = None
    version: str = "1"
    instructions: str | None = None
    module: str | None = Field(default=None, description="Python file relative to this file.")
    values: dict[str, ValueSpec] = Field(default_factory=dict)
    state: dict[str, Any] = Field(default_factory=dict)
    tools: list[ToolSpec] = Field(min_length=1)


Handler = Callable[..., Any]


@dataclass(frozen=True)
class LoadedService:
    """A validated service of one task's simulator, ready to serve."""

    name: str
    """The simulator name from ``task.yaml`` (MCP server name, ledger and state folder)."""
    spec: ServiceSpec
    source: Path
    caps: dict[str, int]
    handlers: dict[str, Handler] = field(default_factory=dict)

    @property
    def notifies(self) -> bool:
        """Whether the tool list can change while connected (advertise ``listChanged``)."""
        return any(c.notify for t in self.spec.tools for c in t.effective_cases()) or any(
            t.visible_when is not None for t in self.spec.tools)


def _problems_of(exc: ValidationError, file: str) -> list[str]:
    out = []
    for item in exc.errors():
        loc = ".".join(str(p) for p in item["loc"])
        msg = item["msg"].removeprefix("Value error, ")
        out.append(f"{file}, field '{loc}': {msg}" if loc else f"{file}: {msg}")
    return out


def _static_checks(spec: ServiceSpec, file: str) -> list[str]:
    problems: list[str] = []
    problems += check_template(spec.state, f"{file}, field 'state'", STATE_ROOTS)
    seen: dict[str, ToolSpec] = {}
    for i, tool in enumerate(spec.tools):
        where = f"{file}, field 'tools.{i}' ({tool.name})"
        prior = seen.get(tool.name)
        if prior is not None and (prior.visible_when is None or tool.visible_when is None):
            problems.append(f"{where}: tool name {tool.name!r} is declared twice; give both "
                            "declarations a 'visible_when' that never holds at the same time")
        seen[tool.name] = tool
        problems += check_template(tool.description, f"{where}.description", LISTING_ROOTS)
        if tool.visible_when is not None:
            problems += check_condition(tool.visible_when, f"{where}.visible_when", LISTING_ROOTS)
        for j, case in enumerate(tool.effective_cases()):
            cw = f"{where}.cases.{j}" if tool.cases is not None else where
            if case.when is not None:
                problems += check_condition(case.when, f"{cw}.when", CALL_ROOTS)
            problems += check_template(case.result, f"{cw}.result", CALL_ROOTS)
            problems += check_template(case.text, f"{cw}.text", CALL_ROOTS)
            if case.error is not None:
                problems += check_template(case.error.model_dump(), f"{cw}.error", CALL_ROOTS)
            if case.large is not None:
                problems += check_template(case.large.tail, f"{cw}.large.tail", CALL_ROOTS)
                try:
                    case.large.line.format(n=1)
                except (KeyError, IndexError, ValueError) as exc:
                    problems.append(f"{cw}.large.line: not a format string with only {{n}}: {exc}")
            for k, eff in enumerate(case.effects):
                problems += check_template("{{ " + eff.path + " }}", f"{cw}.effects.{k}.{eff.op}", CALL_ROOTS)
                problems += check_template(eff.value, f"{cw}.effects.{k}.value", CALL_ROOTS)
    return problems


def _import_module(path: Path, service: str) -> ModuleType:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    mod_name = f"tracetrial_sim_{service}_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # Never write __pycache__ into the task pack.
    previous, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = previous
    return module


def resolve_service_file(pack_root: Path, sim: SimulatorSpec) -> Path:
    """The service file a simulator names (relative to the pack).

    Raises:
        SimulatorConfigError: the path escapes the pack, has the wrong suffix or is missing.
    """
    where = f"task.yaml, simulator {sim.name!r}, field 'service'"
    path = (pack_root / sim.service).resolve()
    if pack_root.resolve() not in path.parents:
        raise SimulatorConfigError(sim.service, [f"{where}: {sim.service!r} is outside the pack"])
    if path.suffix not in SERVICE_SUFFIXES:
        raise SimulatorConfigError(sim.service, [
            (f"{where}: {sim.service!r} is not a service file (use simulators/<name>.yaml; "
            "custom behaviour goes in a Python 'module' the YAML names)")])
    if not path.is_file():
        raise SimulatorConfigError(sim.service, [f"{where}: {sim.service!r} not found (create it)"])
    return path


def load_service(pack_root: Path, sim: SimulatorSpec) -> LoadedService:
    """Load and validate one simulator's service definition, its module and caps.

    Raises:
        SimulatorConfigError: listing every problem found.
    """
    path = resolve_service_file(pack_root, sim)
    file = f"{path.parent.name}/{path.name}"
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else load_yaml(text)
    except (yaml.YAMLError, ValueError) as exc:
        raise SimulatorConfigError(file, [f"{file}: malformed {path.suffix[1:].upper()}: {exc}"]) from exc
    if not isinstance(data, dict):
        raise SimulatorConfigError(file, [f"{file}: expected a mapping at the top level"])
    try:
        spec = ServiceSpec.model_validate(data)
    except ValidationError as exc:
        raise SimulatorConfigError(file, _problems_of(exc, file)) from exc
    problems = _static_checks(spec, file)

    names = {t.name for t in spec.tools}
    for key, limit in sim.caps.items():
        if key != "*" and key not in names:
            problems.append(f"task.yaml, simulator {sim.name!r}, field 'caps.{key}': no tool {key!r} "
                            f"in {file} (tools: {sorted(names)}; '*' caps all requests)")
        if limit < 0:
            problems.append(f"task.yaml, simulator {sim.name!r}, field 'caps.{key}': must be >= 0")

    handlers: dict[str, Handler] = {}
    wanted = {c.handler for t in spec.tools for c in t.effective_cases() if c.handler}
    if spec.module is not None:
        mod_path = (path.parent / spec.module).resolve()
        if not mod_path.is_file() or mod_path.suffix != ".py":
            problems.append(f"{file}, field 'module': {spec.module!r} is not a .py file next to it")
        else:
            try:
                module = _import_module(mod_path, sim.name)
            except Exception as exc:  # noqa: BLE001 - any import failure is a config problem
                problems.append(f"{file}, field 'module': importing {spec.module} failed: "
                                f"{type(exc).__name__}: {exc}")
            else:
                for name in sorted(wanted):
                    fn = getattr(module, name, None)
                    if not callable(fn):
                        problems.append(f"{file}: handler {name!r} is not a function in {spec.module}")
                    else:
                        handlers[name] = fn
    elif wanted:
        problems.append(f"{file}: cases name handlers {sorted(wanted)} but no 'module' is declared")
    if problems:
        raise SimulatorConfigError(file, problems)
    return LoadedService(name=sim.name, spec=spec, source=path, caps=dict(sim.caps), handlers=handlers)


def simulator_specs(pack_root: Path) -> list[SimulatorSpec]:
    """The ``simulators`` of a pack's ``task.yaml`` (without loading the rest of the pack).

    Raises:
        SimulatorConfigError: ``task.yaml`` is missing or its ``simulators`` list is invalid.
    """
    path = pack_root / "task.yaml"
    try:
        data = load_yaml(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SimulatorConfigError("task.yaml", [f"{path}: cannot read: {exc}"]) from exc
    raw = (data.get("simulators") or []) if isinstance(data, dict) else []
    try:
        return [SimulatorSpec.model_validate(item) for item in raw]
    except ValidationError as exc:
        raise SimulatorConfigError("task.yaml", _problems_of(exc, "task.yaml")) from exc
