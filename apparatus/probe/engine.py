"""Per-run probe state and the replay engine.

On every policy request the engine rebuilds the conversation, finds the user
turn, and replays that turn's policy generator *from the start*: each step it
already took is matched to the probe's own call ids and fed the observation the
harness delivered (or, once compaction hid it, the one the run remembers). The
first step that has no result yet is the answer. State is keyed on the run and
the principal (main agent / each sub-agent), never on visible history alone, so
a rewritten history cannot make the script loop.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import traceback
import zlib
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from apparatus.probe.classify import HEARTBEAT_REPLY, classify, principal_of
from apparatus.probe.conversation import (
    Conversation,
    Item,
    is_harness_user_text,
    norm_id,
    notification_content,
    parse,
)
from apparatus.probe.loader import PolicyModule
from apparatus.probe.mapping import YIELD_TOOLS, Plan, PlannedCall, plan_action
from apparatus.probe.report import (
    AbsentCapability,
    ProbeOptions,
    ProbeRunReport,
    RequestKind,
    RequestRecord,
)
from apparatus.probe.summary import compaction_text, title_text
from apparatus.probe.tools import Inventory, ToolDecl
from apparatus.probe.wire import (
    EmittedCall,
    Rendered,
    Reply,
    render_anthropic,
    render_chat,
    render_error,
    render_responses,
)
from tracetrial.harness import WireFormat
from tracetrial.policy import DEFERRED_SEARCH_TOOLS, Action, AskUser, CallTool, CallView, Final, Observation, ProviderError, Turn, TurnView

APPARATUS = "TraceTrial probe apparatus error"


# --------------------------------------------------------------------------- stored state


class StoredView:
    """A :class:`~tracetrial.policy.TurnView` kept compressed: one is stored per policy step for replay."""

    __slots__ = ("_calls", "_deferred", "_descriptions", "_history", "_parameters", "_system", "_tools")

    def __init__(self, view: TurnView):
        self._history = zlib.compress(view.history_text.encode("utf-8"), 1)
        self._system = zlib.compress(view.system_text.encode("utf-8"), 1)
        self._tools = view.tool_names
        self._descriptions = view.tool_descriptions
        self._parameters = view.tool_parameters
        self._calls = view.calls
        self._deferred = view.deferred_tool_names

    @classmethod
    def of(cls, conv: Conversation) -> StoredView:
        return cls(conv.view())

    # decompressed on access only: replay walks every step, policies read few views
    @property
    def history_text(self) -> str:
        return zlib.decompress(self._history).decode("utf-8")

    @property
    def system_text(self) -> str:
        return zlib.decompress(self._system).decode("utf-8")

    @property
    def tool_names(self) -> tuple[str, ...]:
        return self._tools

    @property
    def tool_descriptions(self) -> tuple[tuple[str, str], ...]:
        return self._descriptions

    @property
    def tool_parameters(self) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
        return self._parameters

    @property
    def calls(self) -> tuple[CallView, ...]:
        return self._calls

    @property
    def deferred_tool_names(self) -> tuple[str, ...]:
        return self._deferred


@dataclass
class CallRecord:
    """One tool call the probe issued, and the first observation the harness delivered for it."""

    planned: PlannedCall
    call_id: str
    observation: Observation | None = None


@dataclass
class StepRecord:
    """One policy step: the action, how it was mapped, and what came back."""

    action: Action
    described: dict[str, Any]
    view: StoredView
    request_index: int
    plan: Plan | None = None
    calls: list[CallRecord] = field(default_factory=list)
    observation: Observation | None = None
    final_count: int = 0  # assistant texts equal to the final text when it was decided


@dataclass
class TurnState:
    index: int
    user_text: str
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return bool(self.steps) and isinstance(self.steps[-1].action, Final)


@dataclass
class PrincipalState:
    key: str
    turns: dict[int, TurnState] = field(default_factory=dict)
    current: int = 0


@dataclass
class Outcome:
    """The engine's answer to one request, with what goes into the report."""

    reply: Reply | None = None
    error: tuple[int, str, str | None] | None = None  # status, message, native error type
    kind: RequestKind = "main"
    action: str | None = None
    mapped_tool: str | None = None
    principal: str = "main"
    turn: int | None = None
    step: int | None = None
    call_id: str | None = None
    notes: list[str] = field(default_factory=list)
    arguments: Any = None


class PolicyFailure(Exception):
    """The policy (task code) misbehaved; becomes an apparatus error."""


# --------------------------------------------------------------------------- run


class Run:
    """Everything the probe keeps for one registered run."""

    def __init__(self, run_id: str, module: PolicyModule, options: ProbeOptions, task_id: str | None):
        self.run_id = run_id
        self.module = module
        self.options = options
        self.turn_texts = [t for t in (options.turns or [])]
        self.tag = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8]
        self.lock = threading.Lock()
        self.request_count = 0
        self.call_count = 0
        self.compactions = 0
        self.principals: dict[str, PrincipalState] = {}
        self.pending: dict[str, CallRecord] = {}  # normalized call id -> call still without an observation
        self.report = ProbeRunReport(run_id=run_id, task_id=task_id or options.task_id)

    # ids are unique per run and deterministic: harnesses rebuild history by id
    def new_call_id(self, wire_format: WireFormat) -> str:
        self.call_count += 1
        prefix = "toolu" if wire_format == "anthropic" else "call"
        return f"{prefix}_tt_{self.tag}_{self.call_count}"

    # ------------------------------------------------------------------ entry
    def answer(self, wire_format: WireFormat, raw: bytes, headers: Mapping[str, str]) -> Rendered:
        """Handle one request of this run; never raises."""
        with self.lock:
            self.request_count += 1
            index = self.request_count
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise TypeError("top level is not an object")
            except (ValueError, TypeError) as exc:
                msg = f"{APPARATUS}: request {index} body is not a JSON object ({exc})"
                self.report.apparatus_errors.append(msg)
                self._record(index, wire_format, "", Outcome(kind="apparatus_error"), 400)
                return render_error(wire_format, 400, msg)
            digest = ""
            try:
                conv = parse(wire_format, body)
                digest = conv.digest()
                self._harvest(conv)
                outcome = self._outcome(conv, headers, index)
            except Exception as exc:  # noqa: BLE001 - a probe bug must fail the run loudly, not hang the harness
                outcome = Outcome(kind="apparatus_error",
                                  error=(500, f"{APPARATUS}: internal error {type(exc).__name__}: {exc}", None))
            if outcome.error is not None:
                status, message, etype = outcome.error
                if outcome.kind != "provider_error":
                    self.report.apparatus_errors.append(f"request {index}: {message}")
                self._record(index, wire_format, digest, outcome, status)
                return render_error(wire_format, status, message, etype)
            assert outcome.reply is not None
            reply = self._sized(outcome.reply, raw, index, outcome.kind)
            self._record(index, wire_format, digest, outcome, 200)
            return self._render(conv, raw, reply)

    def _harvest(self, conv: Conversation) -> None:
        """Remember every result of the probe's calls that this request shows, whatever its kind:
        a compaction request may be the only one that ever shows a result before it is summarised."""
        if not self.pending:
            return
        for nid, item in conv.results_by_id().items():
            cr = self.pending.pop(nid, None)
            if cr is not None and cr.observation is None:
                cr.observation = _observed(cr, item)

    # ------------------------------------------------------------------ dispatch
    def _outcome(self, conv: Conversation, headers: Mapping[str, str], index: int) -> Outcome:
        for spec in self.options.provider_errors():
            if spec.at_request <= index < spec.at_request + spec.count:
                return Outcome(kind="provider_error", error=(spec.status, spec.message, spec.error_type))
        kind = classify(conv, headers)
        if kind == "title":
            return Outcome(reply=Reply(text=title_text(conv)), kind="title")
        if kind == "heartbeat":
            # harness housekeeping in its own run: answered as it asks, never given to the policy
            # (whose pending call would otherwise be spent, and its result lost, on that run)
            return Outcome(reply=Reply(text=HEARTBEAT_REPLY), kind="heartbeat")
        if kind == "unscripted":
            return Outcome(kind="unscripted", error=(500, (
                f"{APPARATUS}: unscripted request {index} (no tools declared, not a title or compaction "
                f"request); last user text: {conv.last_user_item_text()[:200]!r}"), None))
        principal = "main" if kind == "compaction" else principal_of(conv, headers)
        try:
            if kind == "compaction":
                self.compactions += 1
                return Outcome(reply=Reply(text=self._summary(conv)), kind="compaction")
            return self._drive(principal, conv, index)
        except PolicyFailure as exc:
            return Outcome(kind="apparatus_error", principal=principal, error=(500, f"{APPARATUS}: {exc}", None))

    def _summary(self, conv: Conversation) -> str:
        hook = self.module.compaction_summary
        if hook is None:
            return compaction_text(conv, None)
        state = self.principals.get("main")
        index = state.current if state else 1
        user = state.turns[index].user_text if state and index in state.turns else conv.latest_user_text()
        turn = Turn(max(index, 1), user, options=self.options.extra,
                    view=conv.view())
        try:
            text = hook(turn)
        except Exception as exc:
            raise PolicyFailure(f"compaction_summary raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(text, str):
            raise PolicyFailure(f"compaction_summary must return str, got {type(text).__name__}")
        return compaction_text(conv, text)

    # ------------------------------------------------------------------ turns
    def _detect_turn(self, state: PrincipalState, conv: Conversation) -> tuple[int, str]:
        genuine = [t for t in conv.user_texts() if not is_harness_user_text(t)]
        if state.key != "main":
            if 1 in state.turns:
                return 1, state.turns[1].user_text
            # A child's task is the delegation, its newest user text: a harness may put context
            # ahead of it (a forked history, the parent's conversation) and an ideal child still
            # does what it was delegated.
            return 1, (genuine[-1] if genuine else conv.latest_user_text())
        latest = genuine[-1] if genuine else ""
        if self.turn_texts:
            hay = _ws(latest)
            cur = state.current
            for i in range(cur + 1, len(self.turn_texts) + 1):  # the next turn whose text was sent
                needle = _ws(self.turn_texts[i - 1])
                if not needle or needle not in hay:
                    continue
                # identical consecutive texts ("continue", "continue"): only a finished turn moves on
                if cur and needle == _ws(self.turn_texts[cur - 1]) and not state.turns[cur].ended:
                    break
                return i, self.turn_texts[i - 1]
            best = max(cur, 1)
            return best, self.turn_texts[best - 1]
        if state.current == 0:
            return 1, latest
        # no declared turns: a new, unseen user text after a finished turn starts the next one
        ts = state.turns[state.current]
        if latest and ts.ended and not any(_ws(t.user_text) == _ws(latest) for t in state.turns.values()):
            return state.current + 1, latest
        return state.current, ts.user_text

    def _factory(self, principal: str) -> Callable[[Turn], Any]:
        if principal == "main":
            return self.module.policy
        sub = self.module.subagent_policy
        if sub is None:
            return _default_child
        if self.module.subagent_wants_turn:
            return sub
        return lambda turn: sub(turn.user_text)

    def _drive(self, principal: str, conv: Conversation, index: int) -> Outcome:
        state = self.principals.setdefault(principal, PrincipalState(principal))
        k, user_text = self._detect_turn(state, conv)
        tstate = state.turns.setdefault(k, TurnState(k, user_text))
        state.current = max(state.current, k)
        turn = Turn(k, tstate.user_text, principal=principal, options=self.options.extra)
        outcome = self._replay(tstate, turn, self._factory(principal), conv, index)
        outcome.principal, outcome.turn = principal, k
        if outcome.kind == "main" and principal != "main":
            outcome.kind = "subagent"
        if principal == "main" and outcome.reply is not None and outcome.reply.text is not None:
            self.report.final_text = outcome.reply.text
        return outcome

    # ------------------------------------------------------------------ replay
    def _replay(self, tstate: TurnState, turn: Turn, factory: Callable[[Turn], Any], conv: Conversation,
                index: int) -> Outcome:
        steps = tstate.steps
        results = conv.results_by_id()
        visible_calls = conv.call_ids()
        current = StoredView.of(conv)
        where = f"turn {tstate.index} of {turn.principal}"

        def set_view(i: int) -> None:
            turn._view = steps[i].view if i < len(steps) else current

        set_view(0)
        try:
            gen = factory(turn)
        except Exception as exc:
            raise PolicyFailure(f"calling the policy for {where} raised {_where(exc)}") from exc
        if not isinstance(gen, Generator):
            raise PolicyFailure(f"the policy for {where} returned {type(gen).__name__}, not a generator")
        i = 0
        exhausted = False
        last_final: StepRecord | None = None
        action: Action | None
        try:
            action = next(gen)
        except StopIteration as stop:
            action, exhausted = _returned(stop.value), True
        except Exception as exc:
            raise PolicyFailure(f"policy raised {_where(exc)} at step 0 of {where}") from exc
        while True:
            if action is None:
                if last_final is not None:  # resumed after final and ended: repeat the final answer
                    text = last_final.described["text"]
                    return Outcome(reply=Reply(text=text), action="final", step=i,
                                   notes=["policy ended after final(); repeated its final text"])
                raise PolicyFailure(f"the policy for {where} ended without yielding final(...) "
                                    f"(after {i} step(s)); end every turn with `yield final(text)`")
            if not isinstance(action, Action):
                raise PolicyFailure(f"policy yielded {action!r} at step {i} of {where}; yield an action "
                                    "from tracetrial.policy (shell(...), read_file(...), final(...), …)")
            if isinstance(action, ProviderError):
                # Not a step: the request (and each retry, which replays to here) gets the error.
                return Outcome(kind="provider_error", action="provider_error", step=i,
                               error=(action.status, action.message, None),
                               notes=[f"policy: HTTP {action.status} for this request"])
            if i < len(steps):
                rec = steps[i]
                if rec.described != action.describe():
                    raise PolicyFailure(
                        f"policy is not replay-deterministic at step {i} of {where}: it first yielded "
                        f"{rec.described} and now {action.describe()}; derive actions only from observations "
                        "and turn (no clocks, randomness or I/O)")
            else:
                rec = self._decide(tstate, turn, action, conv, current, index)
            obs: Observation | None
            if isinstance(action, Final):
                last_final = rec
                obs = _after_final(rec, conv)
                if obs is None:
                    return Outcome(reply=Reply(text=action.text), action="final", step=i)
            elif rec.plan is not None and rec.plan.absent:
                obs = rec.observation
            else:
                pending = _resolve(rec, results, visible_calls)
                if isinstance(pending, CallRecord):
                    return self._emit(rec, pending, i)
                obs = _with_resumption(pending, rec, conv)
            i += 1
            if exhausted:
                action = None
                continue
            set_view(i)
            try:
                action = gen.send(obs)
            except StopIteration as stop:
                action, exhausted = _returned(stop.value), True
            except Exception as exc:
                raise PolicyFailure(f"policy raised {_where(exc)} at step {i} of {where}") from exc

    def _decide(self, tstate: TurnState, turn: Turn, action: Action, conv: Conversation, current: StoredView,
                index: int) -> StepRecord:
        rec = StepRecord(action, action.describe(), current, index)
        if isinstance(action, Final):
            rec.final_count = _count_texts(conv, action.text)
        else:
            try:
                inv = Inventory(conv.tools)
                deferred: tuple[str, ...] = ()
                revealed: list[ToolDecl] = []
                if isinstance(action, (CallTool, AskUser)) and inv.first(DEFERRED_SEARCH_TOOLS) is not None:
                    deferred = conv.deferred_tool_names()
                    revealed = conv.revealed_tools(DEFERRED_SEARCH_TOOLS)
                plan = plan_action(action, inv, conv.cwd(), deferred=deferred, revealed=revealed)
            except TypeError as exc:
                raise PolicyFailure(str(exc)) from exc
            rec.plan = plan
            if plan.absent:
                rec.observation = Observation(absent=True, kind="absent")
                self.report.absent_capabilities.append(AbsentCapability(
                    action=action.kind, needed=plan.needed or "", declared_tools=list(conv.tool_names),
                    principal=turn.principal, turn=tstate.index, request_index=index))
            else:
                rec.calls = [CallRecord(pc, self.new_call_id(conv.wire_format)) for pc in plan.calls]
                self.pending.update((norm_id(cr.call_id), cr) for cr in rec.calls)
        tstate.steps.append(rec)
        return rec

    def _emit(self, rec: StepRecord, cr: CallRecord, step: int) -> Outcome:
        plan = rec.plan
        assert plan is not None
        notes = list(plan.notes)
        if cr is not rec.calls[-1]:
            notes.append(f"{cr.planned.display} first, then {rec.calls[-1].planned.display}")
        call = EmittedCall(cr.call_id, cr.planned.tool.name, cr.planned.tool.namespace, cr.planned.arguments)
        return Outcome(reply=Reply(call=call), action=rec.action.kind, mapped_tool=cr.planned.display, step=step,
                       call_id=cr.call_id, notes=notes, arguments=cr.planned.action_arguments)

    # ------------------------------------------------------------------ output
    def _sized(self, reply: Reply, raw: bytes, index: int, kind: str) -> Reply:
        """Usage ≈ chars/4 so token accounting works offline, or the task's large value."""
        out = reply.text if reply.call is None else json.dumps(reply.call.arguments, ensure_ascii=False)
        input_tokens = max(1, math.ceil(len(raw) / 4))
        spec = self.options.usage_spec()
        if (spec is not None and kind in ("main", "subagent") and index >= spec.from_request
                and self.compactions < spec.compactions):
            input_tokens = spec.tokens
        return replace(reply, input_tokens=input_tokens, output_tokens=max(1, math.ceil(len(out or "") / 4)))

    def _render(self, conv: Conversation, raw: bytes, reply: Reply) -> Rendered:
        digest = hashlib.sha256(self.run_id.encode("utf-8") + b"\0" + raw).hexdigest()[:24]
        model = conv.model or "probe"
        if conv.wire_format == "anthropic":
            return render_anthropic(reply, model=model, message_id=f"msg_tt_{digest}", stream=conv.stream)
        if conv.wire_format == "responses":
            item_id = f"fc_{reply.call.call_id}" if reply.call else f"msg_tt_{digest}"
            return render_responses(reply, model=model, response_id=f"resp_tt_{digest}", item_id=item_id,
                                    stream=conv.stream)
        opts = conv.body.get("stream_options")
        include = bool(opts.get("include_usage")) if isinstance(opts, dict) else False
        return render_chat(reply, model=model, completion_id=f"chatcmpl-tt{digest}", stream=conv.stream,
                           include_usage=include)

    def _record(self, index: int, wire_format: WireFormat, digest: str, o: Outcome, status: int) -> None:
        self.report.requests.append(RequestRecord(
            index=index, wire_format=wire_format, kind=o.kind, observation_digest=digest, action=o.action,
            mapped_tool=o.mapped_tool, principal=o.principal, turn=o.turn, step=o.step, call_id=o.call_id,
            arguments=o.arguments,
            status=status, notes=o.notes))


# --------------------------------------------------------------------------- helpers


def _ws(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _returned(value: Any) -> Action | None:
    """A generator's return value: a str ends the turn like ``final(value)``."""
    return Final(value) if isinstance(value, str) else None


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    frame = frames[-1] if frames else None
    loc = f" ({frame.filename}:{frame.lineno})" if frame else ""
    return f"{type(exc).__name__}: {exc}{loc}"


def _count_texts(conv: Conversation, text: str) -> int:
    t = text.strip()
    return sum(1 for it in conv.items if it.kind == "assistant" and it.text.strip() == t)


def _resolve(rec: StepRecord, results: dict[str, Item], visible_calls: set[str]) -> Observation | CallRecord:
    """The step's observation, or the call that must be (re)emitted now."""
    for cr in rec.calls:
        nid = norm_id(cr.call_id)
        item = results.get(nid)
        if item is not None:
            if cr.observation is None:
                cr.observation = _observed(cr, item)
            continue
        if cr.observation is not None:
            continue  # compaction hid it: the run remembers what the model was shown
        if nid in visible_calls:  # the harness kept our call but delivered no result
            cr.observation = Observation(kind="missing", tool=cr.planned.display, call_id=cr.call_id)
            continue
        return cr  # not sent yet, or the harness retried without it: (re)emit the same call and id
    last = rec.calls[-1]
    assert last.observation is not None
    return replace(last.observation, visible=norm_id(last.call_id) in results)


def _with_resumption(obs: Observation, rec: StepRecord, conv: Conversation) -> Observation:
    """A step that yielded its turn (``sessions_yield``) observes what the harness resumed it with
    too: OpenClaw 2026.6.9 delivers a child's reply only in the completion event it puts into the
    parent's conversation after the yield (its ``subagents list`` has no reply; 2026.9.6's has)."""
    yields = [norm_id(cr.call_id) for cr in rec.calls if cr.planned.tool.name in YIELD_TOOLS]
    if not yields or obs.text is None:
        return obs
    start = next((j for j, it in enumerate(conv.items)
                  if it.kind == "tool_result" and norm_id(it.call_id) == yields[-1]), None)
    if start is None:
        return obs
    resumed = [notification_content(it.text) for it in conv.items[start + 1:] if it.kind == "user"]
    resumed = [t for t in resumed if t]
    return replace(obs, text="\n".join([obs.text, *resumed])) if resumed else obs


def _observed(cr: CallRecord, item: Item) -> Observation:
    return Observation(text=item.text, is_error=item.is_error, raw=item.raw, tool=cr.planned.display,
                       call_id=cr.call_id)


def _after_final(rec: StepRecord, conv: Conversation) -> Observation | None:
    """New user-role content after our final text (a notification), else ``None`` (answer the final)."""
    if rec.observation is not None:
        return rec.observation
    text = str(rec.described["text"]).strip()
    positions = [j for j, it in enumerate(conv.items) if it.kind == "assistant" and it.text.strip() == text]
    if len(positions) <= rec.final_count:
        return None
    after = conv.items[positions[-1] + 1:]
    texts = [it.text for it in after if it.kind in ("user", "tool_result", "system") and notification_content(it.text)]
    if not texts:
        return None
    rec.observation = Observation(text="\n".join(texts), kind="notification", raw=[it.raw for it in after])
    return rec.observation


def _default_child(turn: Turn) -> Generator[Action, Observation, None]:
    """A child without ``subagent_policy``: answers the delegated prompt."""
    yield Final(f"Done: {turn.user_text}")
