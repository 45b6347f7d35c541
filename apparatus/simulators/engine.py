"""The service runtime: persisted state, request caps, dispatch, effects and the ledger.

Transport-free (the MCP server in :mod:`.serve` wraps it), synchronous, and safe
across processes: every request holds an exclusive lock on the state folder,
reloads ``state.json``, writes its ledger records, then saves the state. A
harness that restarts its MCP server (every turn, or a resumed session) finds
the same business state, call counts and session counter.

``<state-dir>/state.json``::

    {"session": 2, "received": {"tool": n}, "received_total": n,
     "served": {"tool": n}, "served_total": n, "refused_total": n, "state": {...}}

Order of one ``tools/call``: ``request`` record → cap check (``refused`` record,
nothing else happens) → tool lookup and argument validation (``error``) →
first matching case → per-call ``issued`` values → ``transition`` records →
``issued`` records for run values the answer carries → ``error`` record when
the answer is an error → state saved → (after the lock) ``delay_s`` sleep in
the server → answer.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema.exceptions import best_match  # type: ignore[import-untyped,unused-ignore]
from jsonschema.validators import validator_for  # type: ignore[import-untyped,unused-ignore]

from apparatus.simulators.errors import TemplateError
from apparatus.simulators.expr import Missing, Scope, holds, locate, render
from apparatus.simulators.ledger import Ledger, LedgerKind
from apparatus.simulators.spec import Case, LargeSpec, LoadedService, ToolSpec
from tracetrial.files import atomic_write_text
from tracetrial.handlers import Call, Reply, StatePath
from tracetrial.values import ValueSpec, derive_value

STATE_FILE = "state.json"
LOCK_FILE = ".lock"


@dataclass
class Outcome:
    """What the transport sends back for one ``tools/call``."""

    text: str
    structured: Any = None
    is_error: bool = False
    code: str | None = None
    delay_s: float = 0.0
    notify_tools_changed: bool = False
    request_seq: int | None = None


@dataclass(frozen=True)
class ToolView:
    """A tool as listed to the client in the current session."""

    name: str
    description: str
    input_schema: dict[str, Any]
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None


class _ApparatusFault(Exception):
    """The service definition or a handler failed: never the caller's fault."""


@dataclass
class _Pending:
    """Ledger records and state produced by one call, written only if it succeeds."""

    state: dict[str, Any]
    shadow: dict[str, Any]
    records: list[tuple[LedgerKind, dict[str, Any]]] = field(default_factory=list)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _large_text(spec: LargeSpec, tail: str) -> str:
    target = spec.size_kb * 1024
    tail_len = len(tail.encode("utf-8"))
    lines: list[str] = []
    size, n = 0, 1
    while True:
        line = spec.line.format(n=n)
        step = len(line.encode("utf-8")) + 1
        if size + step + tail_len > target:
            break
        lines.append(line)
        size += step
        n += 1
    lines.append(tail)
    return "\n".join(lines)


def _locate_keys(state: dict[str, Any], keys: Sequence[Any], *, create: bool) -> tuple[Any, Any, list[Any]]:
    if not keys:
        raise TemplateError("a state path needs at least one key")
    container: Any = state
    for key in keys[:-1]:
        if isinstance(container, dict):
            if key not in container:
                if not create:
                    raise TemplateError(f"state path {list(keys)!r}: {key!r} not found")
                container[key] = {}
            container = container[key]
        elif isinstance(container, list) and isinstance(key, int) and -len(container) <= key < len(container):
            container = container[key]
        else:
            raise TemplateError(f"state path {list(keys)!r}: {key!r} not found")
    return container, keys[-1], list(keys)


class ServiceRuntime:
    """One simulator of one run: the state folder, the ledger and the seed."""

    def __init__(self, service: LoadedService, state_dir: Path, ledger: Ledger, seed: str):
        self.service = service
        self.state_dir = state_dir
        self.ledger = ledger
        self.seed = seed
        self.values: dict[str, Any] = {
            name: derive_value(seed, spec, service=service.name, name=name)
            for name, spec in service.spec.values.items()
        }

    # ---- persistence ------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Hold the state lock; yield the persisted document (initialized on first use)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.state_dir / LOCK_FILE).open("a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                path = self.state_dir / STATE_FILE
                if path.exists():
                    doc = json.loads(path.read_text(encoding="utf-8"))
                else:
                    doc = self._initialize()
                yield doc
                self._save(doc)
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _save(self, doc: dict[str, Any]) -> None:
        atomic_write_text(self.state_dir / STATE_FILE, json.dumps(doc, ensure_ascii=False), fsync=True)

    def _initialize(self) -> dict[str, Any]:
        scope = Scope({"values": self.values, "session": 1})
        state = render(self.service.spec.state, scope)
        self.ledger.append("transition", detail={"op": "init", "at": [], "new": state})
        for name in sorted(scope.touched):
            if name in self.values:
                self.ledger.append("issued", detail={"name": name, "value": self.values[name],
                                                     "scope": "run", "via": "initial_state"})
        return {"session": 0, "received": {}, "received_total": 0, "served": {}, "served_total": 0,
                "refused_total": 0, "state": state}

    # ---- sessions and listing ---------------------------------------------------------

    def start_session(self) -> int:
        """Count a new server session (process start); return its 1-based number."""
        with self._locked() as doc:
            doc["session"] += 1
            self.ledger.append("transition", detail={"op": "session_start", "session": doc["session"],
                                                     "pid": os.getpid()})
            return int(doc["session"])

    def _visible(self, doc: dict[str, Any]) -> list[ToolSpec]:
        scope = Scope({"state": doc["state"], "values": self.values, "session": doc["session"]})
        out: dict[str, ToolSpec] = {}
        for tool in self.service.spec.tools:
            if tool.name not in out and (tool.visible_when is None or holds(tool.visible_when, scope)):
                out[tool.name] = tool
        return list(out.values())

    def note_request(self, method: str, params: Any) -> None:
        """Record a protocol request other than tools/list and tools/call (e.g. initialize)."""
        with self._locked() as doc:
            self.ledger.append("request", arguments=params,
                               detail={"method": method, "session": doc["session"]})

    def list_tools(self, params: Any = None) -> list[ToolView]:
        """The tools visible now (state and session), recorded as a ``tools/list`` request."""
        with self._locked() as doc:
            scope = Scope({"state": doc["state"], "values": self.values, "session": doc["session"]})
            views = [ToolView(name=t.name, title=t.title, description=render(t.description, scope),
                              input_schema=t.input_schema, output_schema=t.output_schema,
                              annotations=t.annotations) for t in self._visible(doc)]
            req = self.ledger.append("request", arguments=params, detail={
                "method": "tools/list", "session": doc["session"], "tools": [v.name for v in views]})
            for name in sorted(scope.touched):
                if name in self.values:
                    self.ledger.append("issued", detail={"name": name, "value": self.values[name],
                                                         "scope": "run", "via": "tools/list",
                                                         "request_seq": req["seq"]})
            return views

    # ---- calls ------------------------------------------------------------------------

    def call_tool(self, name: str, arguments: Any) -> Outcome:
        """Serve one ``tools/call``; never raises for caller or definition faults."""
        with self._locked() as doc:
            doc["received"][name] = doc["received"].get(name, 0) + 1
            doc["received_total"] += 1
            req = self.ledger.append("request", tool=name, arguments=arguments, detail={
                "method": "tools/call", "session": doc["session"],
                "attempt": doc["received"][name], "attempt_total": doc["received_total"]})
            seq = int(req["seq"])

            refusal = self._refusal(doc, name, seq)
            if refusal is not None:
                return refusal
            doc["served"][name] = doc["served"].get(name, 0) + 1
            doc["served_total"] += 1

            visible = self._visible(doc)
            tool = next((t for t in visible if t.name == name), None)
            if tool is None:
                return self._error(name, seq, "UNKNOWN_TOOL", f"tool {name!r} is not available; "
                                   f"available tools: {[t.name for t in visible]}")
            args = arguments if arguments is not None else {}
            if tool.validate_input:
                err = best_match(validator_for(tool.input_schema)(tool.input_schema).iter_errors(args))
                if err is not None:
                    where = "/".join(str(p) for p in err.absolute_path) or "(root)"
                    return self._error(name, seq, "INVALID_ARGUMENTS", f"{where}: {err.message}",
                                       data={"path": list(err.absolute_path), "validator": err.validator})
            try:
                outcome, pending = self._run(doc, tool, args, arguments, seq)
            except _ApparatusFault as exc:
                return self._error(name, seq, "INTERNAL_SIMULATOR_ERROR", str(exc), apparatus=True)
            for kind, detail in pending.records:
                self.ledger.append(kind, tool=name, detail={**detail, "request_seq": seq})
            doc["state"] = pending.state
            outcome.request_seq = seq
            return outcome

    def _refusal(self, doc: dict[str, Any], name: str, seq: int) -> Outcome | None:
        for key, served in ((name, doc["served"].get(name, 0)), ("*", doc["served_total"])):
            limit = self.service.caps.get(key)
            if limit is None or served < limit:
                continue
            doc["refused_total"] += 1
            what = f"tool {name!r}" if key == name else "all tools"
            message = (f"request refused: the cap on {what} of service {self.service.name!r} is "
                       f"{limit} request(s) per run and {served} were already served; "
                       "this request was not executed")
            data = {"cap": key, "limit": limit, "served": served}
            self.ledger.append("refused", tool=name, detail={**data, "budget_violation": True,
                                                             "request_seq": seq})
            structured = {"error": {"code": "REQUEST_CAP_EXCEEDED", "message": message, "data": data}}
            return Outcome(text=_json(structured), structured=structured, is_error=True,
                           code="REQUEST_CAP_EXCEEDED", request_seq=seq)
        return None

    def _error(self, tool: str, seq: int, code: str, message: str, *, data: Any = None,
               apparatus: bool = False) -> Outcome:
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        detail: dict[str, Any] = {**err, "request_seq": seq}
        if apparatus:
            detail["apparatus"] = True
        self.ledger.append("error", tool=tool, detail=detail)
        structured = {"error": err}
        return Outcome(text=_json(structured), structured=structured, is_error=True, code=code,
                       request_seq=seq)

    def _run(self, doc: dict[str, Any], tool: ToolSpec, args: dict[str, Any], raw: Any,
             seq: int) -> tuple[Outcome, _Pending]:
        args = copy.deepcopy(args)
        for prop, sub in (tool.input_schema.get("properties") or {}).items():
            if prop not in args and isinstance(sub, dict) and "default" in sub:
                args[prop] = copy.deepcopy(sub["default"])
        before = copy.deepcopy(doc["state"])
        pending = _Pending(state=copy.deepcopy(before), shadow=copy.deepcopy(before))
        count = int(doc["served"][tool.name])
        call_info = {"tool": tool.name, "count": count, "total": doc["served_total"],
                     "session": doc["session"]}
        issued: dict[str, Any] = {}
        roots = {"args": args, "state": pending.state, "before": before, "values": self.values,
                 "issued": issued, "call": call_info, "session": doc["session"]}
        try:
            case = next((c for c in tool.effective_cases()
                         if c.when is None or holds(c.when, Scope(roots))), None)
            if case is None:
                raise _ApparatusFault(f"no case of tool {tool.name!r} matches these arguments; "
                                      "add a final case without 'when'")

            def issue(name: str, spec: ValueSpec) -> Any:
                value = derive_value(self.seed, spec, service=self.service.name, name=name,
                                     scope=tool.name, index=count)
                issued[name] = value
                pending.records.append(("issued", {"name": name, "value": value, "scope": "call",
                                                   "call": count}))
                return value

            def apply(op: str, path: StatePath, value: Any) -> None:
                self._apply(pending, op, path, value, Scope(roots))

            if case.handler is not None:
                reply = self._handler(case, Call(
                    tool=tool.name, args=args, raw_arguments=raw, state=pending.state, before=before,
                    values=self.values, session=doc["session"], count=count, total=doc["served_total"],
                    _apply=apply, _issue=issue))
                self._record_direct_edits(pending)
                return self._outcome(reply, pending, Scope(roots), case), pending
            for name, spec in case.issue.items():
                issue(name, spec)
            for eff in case.effects:
                value = render(eff.value, Scope(roots)) if eff.op in ("set", "append") else eff.by
                apply(eff.op, eff.path, value)
            scope = Scope(roots)
            reply = Reply(delay_s=case.delay_s, notify_tools_changed=bool(case.notify))
            if case.error is not None:
                reply.error = render(case.error.model_dump(exclude_none=True), scope)
            if case.result is not None:
                reply.result = render(case.result, scope)
            if case.text is not None:
                reply.text = render(case.text, scope)
            if case.large is not None:
                reply.text = _large_text(case.large, str(render(case.large.tail, scope)))
            outcome = self._outcome(reply, pending, scope, case)
        except TemplateError as exc:
            raise _ApparatusFault(f"tool {tool.name!r}: {exc}") from exc
        return outcome, pending

    def _handler(self, case: Case, call: Call) -> Reply:
        fn = self.service.handlers[str(case.handler)]
        try:
            out = fn(call)
        except Exception as exc:
            last = traceback.extract_tb(exc.__traceback__)[-1]
            raise _ApparatusFault(f"handler {case.handler!r} raised {type(exc).__name__}: {exc} "
                                  f"({Path(last.filename).name}:{last.lineno})") from exc
        if isinstance(out, Reply):
            reply = out
        elif isinstance(out, str):
            reply = Reply(text=out)
        elif out is None:
            raise _ApparatusFault(f"handler {case.handler!r} returned None; return a Reply, dict, list or str")
        else:
            reply = Reply(result=out)
        if case.delay_s and not reply.delay_s:
            reply.delay_s = case.delay_s
        reply.notify_tools_changed = reply.notify_tools_changed or bool(case.notify)
        return reply

    def _outcome(self, reply: Reply, pending: _Pending, scope: Scope, case: Case) -> Outcome:
        for name in sorted(scope.touched):
            if name in self.values:
                pending.records.append(("issued", {"name": name, "value": self.values[name],
                                                   "scope": "run", "via": "result"}))
        if reply.error is not None:
            err = reply.error
            if not isinstance(err, dict) or "code" not in err or "message" not in err:
                raise _ApparatusFault(f"error must be a mapping with code and message, got {err!r}")
            structured: Any = {"error": err}
            pending.records.append(("error", dict(err)))
            text = reply.text if reply.text is not None else _json(structured)
            return Outcome(text=text, structured=structured, is_error=True, code=str(err["code"]),
                           delay_s=reply.delay_s, notify_tools_changed=reply.notify_tools_changed)
        structured = None
        if reply.result is not None:
            structured = reply.result if isinstance(reply.result, dict) else {"result": reply.result}
        text = reply.text if reply.text is not None else (
            _json(reply.result) if reply.result is not None else "")
        if not isinstance(text, str):
            text = _json(text)
        return Outcome(text=text, structured=structured, delay_s=reply.delay_s,
                       notify_tools_changed=reply.notify_tools_changed)

    # ---- effects ----------------------------------------------------------------------

    def _apply(self, pending: _Pending, op: str, path: StatePath, value: Any, scope: Scope) -> None:
        label = path if isinstance(path, str) else list(path)
        detail: dict[str, Any] = {"op": op, "path": label}
        for target in (pending.state, pending.shadow):
            create = op != "delete"
            if isinstance(path, str):
                container, key, keys = locate(path, target, scope, create=create)
            else:
                container, key, keys = _locate_keys(target, list(path), create=create)
            detail["at"] = keys
            self._apply_one(op, container, key, copy.deepcopy(value), detail, label)
        pending.records.append(("transition", detail))

    @staticmethod
    def _apply_one(op: str, container: Any, key: Any, value: Any, detail: dict[str, Any],
                   label: Any) -> None:
        exists = (key in container) if isinstance(container, dict) else (
            isinstance(key, int) and -len(container) <= key < len(container))
        old = container[key] if exists else None
        if op == "set":
            if isinstance(container, list) and not exists:
                raise TemplateError(f"set {label!r}: list index {key!r} out of range")
            container[key] = value
            detail.update(old=old, new=value, created=not exists)
        elif op == "append":
            if not exists:
                if isinstance(container, list):
                    raise TemplateError(f"append {label!r}: list index {key!r} out of range")
                container[key] = old = []
            if not isinstance(old, list):
                raise TemplateError(f"append {label!r}: target is a {type(old).__name__}, not a list")
            old.append(value)
            detail.update(new=value, index=len(old) - 1)
        elif op == "increment":
            base = old if exists else 0
            if isinstance(base, bool) or not isinstance(base, (int, float)) or isinstance(value, bool) \
                    or not isinstance(value, (int, float)):
                raise TemplateError(f"increment {label!r}: needs numbers, got {base!r} + {value!r}")
            container[key] = base + value
            detail.update(old=old, new=base + value, by=value)
        elif op == "delete":
            if not exists:
                raise TemplateError(f"delete {label!r}: nothing there")
            del container[key]
            detail.update(old=old)
        else:
            raise TemplateError(f"unknown effect {op!r}")

    def _record_direct_edits(self, pending: _Pending) -> None:
        """A handler edited ``call.state`` directly: record one ``mutate`` per changed key."""
        state, shadow = pending.state, pending.shadow
        for key in sorted(set(state) | set(shadow)):
            new, old = state.get(key, Missing(key)), shadow.get(key, Missing(key))
            if _json_or(new) != _json_or(old):
                pending.records.append(("transition", {
                    "op": "mutate", "path": f"state.{key}", "at": [key],
                    "old": None if isinstance(old, Missing) else old,
                    "new": None if isinstance(new, Missing) else new,
                    "created": isinstance(old, Missing), "deleted": isinstance(new, Missing)}))
        pending.shadow = copy.deepcopy(state)


def _json_or(value: Any) -> str:
    if isinstance(value, Missing):
        return "\x00missing"
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
