"""The simulated user: a scripted conversation partner and an ask-user responder.

**Scripted user** (``conversation: simulator`` tasks). Deterministic: it reads
the harness's last assistant message text and decides the next user message,
or the end, from declared rules. The script lives in the pack at
``simulators/scripted_user.yaml``::

    max_turns: 4                 # user turns in all, prompt.md included (default: budgets.max_user_turns)
    rules:                       # first matching rule wins (Python regex, searched)
      - when: "(?i)which (region|environment)"
        reply: "Use eu-west-3, the staging region."
        once: true               # fire at most once
      - when: "(?i)\\b(done|completed)\\b"
        end: true
        reason: the agent reported completion
    default: {end: true, reason: no rule matched}      # or {reply: "Please continue."}

Each call of :meth:`ScriptedUser.decide` returns a :class:`UserDecision`; the
cell turns it into a ``conversation_simulator_decision`` event with
:meth:`UserDecision.to_event`.

**Ask-user responder.** Answers structured clarification requests (a harness's
native ask-user channel) from the private value the task declares in
``truth.json`` under ``ask_user``, and logs each question and answer to the
private ledger ``<run>/private/ledgers/_ask_user.jsonl``::

    {"ask_user": "eu-west-3"}                                   one value for any question
    {"ask_user": {"answers": [{"match": "(?i)region", "answer": "eu-west-3"}],
                  "default": "No preference."}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from apparatus.simulators.errors import SimulatorConfigError
from apparatus.simulators.ledger import Ledger
from tracetrial.files import load_yaml
from tracetrial.model import StrictModel
from tracetrial.task import TaskPack
from tracetrial.trace import ConversationSimulatorDecisionEvent, utc_now

SCRIPT_FILE = "simulators/scripted_user.yaml"
ASK_USER_SERVICE = "_ask_user"
"""Ledger name of the responder (a leading underscore: never a task simulator's name)."""


class UserAction(StrictModel):
    """Reply with ``reply``, or ``end: true``."""

    reply: str | None = Field(default=None, min_length=1)
    end: bool = False
    reason: str | None = None

    @model_validator(mode="after")
    def _one(self) -> UserAction:
        if (self.reply is None) == (not self.end):
            raise ValueError("give exactly one of 'reply: <text>' or 'end: true'")
        return self


class UserRule(UserAction):
    """A rule: when ``when`` (regex) is found in the assistant's text, act."""

    when: str
    once: bool = False

    @field_validator("when")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return v


class UserScript(StrictModel):
    """``simulators/scripted_user.yaml``."""

    max_turns: int | None = Field(default=None, ge=1, le=120)
    rules: list[UserRule] = Field(default_factory=list)
    default: UserAction = Field(default_factory=lambda: UserAction(end=True, reason="no rule matched"))


@dataclass(frozen=True)
class UserDecision:
    """What the simulated user does after one assistant message."""

    decision: Literal["reply", "end"]
    reason: str
    next_user_text: str | None
    turn: int
    """The user turn whose assistant message was read (1 = the prompt's turn)."""
    rule: int | None = None
    """Index of the rule that fired (None: default, max_turns or already ended)."""

    def to_event(self, *, run_id: str, seq: int, timestamp: datetime | None = None,
                 **envelope: Any) -> ConversationSimulatorDecisionEvent:
        """The ``conversation_simulator_decision`` Trace IR event for this decision."""
        return ConversationSimulatorDecisionEvent(
            run_id=run_id, seq=seq, timestamp=timestamp or utc_now(), decision=self.decision,
            reason=self.reason, next_user_text=self.next_user_text, source="simulator:user",
            conversation_turn=self.turn, **envelope)


def _load_yaml_model(path: Path, model: type[BaseModel], file: str) -> Any:
    try:
        data = load_yaml(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SimulatorConfigError(file, [f"{file}: cannot read: {exc}"]) from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SimulatorConfigError(file, [
            f"{file}, field '{'.'.join(map(str, e['loc']))}': {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()]) from exc


class ScriptedUser:
    """A deterministic user driven by a :class:`UserScript`. One instance per run."""

    def __init__(self, script: UserScript, *, max_turns: int = 120):
        self.script = script
        self.max_turns = script.max_turns or max_turns
        self.turn = 1
        self.ended = False
        self._fired: set[int] = set()

    @classmethod
    def from_pack(cls, task: TaskPack) -> ScriptedUser:
        """Load ``simulators/scripted_user.yaml``; ``max_turns`` defaults to the task budget.

        Raises:
            SimulatorConfigError: the script is missing or invalid.
        """
        path = task.root / SCRIPT_FILE
        if not path.is_file():
            raise SimulatorConfigError(SCRIPT_FILE, [
                f"{SCRIPT_FILE}: missing; a 'conversation: simulator' task declares its user here"])
        script = _load_yaml_model(path, UserScript, SCRIPT_FILE)
        return cls(script, max_turns=task.spec.budgets.max_user_turns)

    def decide(self, assistant_text: str | None) -> UserDecision:
        """Read the last assistant message of the current turn; decide the next user turn."""
        turn = self.turn
        if self.ended:
            return UserDecision("end", "the conversation already ended", None, turn)
        text = assistant_text or ""
        action: UserAction = self.script.default
        index: int | None = None
        for i, rule in enumerate(self.script.rules):
            if rule.once and i in self._fired:
                continue
            if re.search(rule.when, text):
                action, index = rule, i
                break
        where = f"rule {index} (/{self.script.rules[index].when}/)" if index is not None else "default"
        if action.end:
            self.ended = True
            return UserDecision("end", action.reason or f"{where} ends the conversation", None, turn, index)
        if turn >= self.max_turns:
            self.ended = True
            return UserDecision("end", f"max_turns {self.max_turns} reached ({where} would have replied)",
                                None, turn)
        if index is not None:
            self._fired.add(index)
        self.turn += 1
        return UserDecision("reply", action.reason or f"{where} matched", action.reply, turn, index)


# ---- ask-user responder -------------------------------------------------------------------


def option_labels(question: Mapping[str, Any]) -> list[str] | None:
    """The option labels of one question as a harness's ask tool carries it (``options`` as
    ``[{label, description}]`` or plain strings; Claude Code AskUserQuestion, DeepSeek
    ask_user_question), or None when it offers none: the ``options`` of a
    :class:`ClarificationRequest`."""
    options = question.get("options")
    if not isinstance(options, list):
        return None
    labels = [str(o.get("label", "")) if isinstance(o, dict) else str(o) for o in options]
    return [label for label in labels if label] or None


@dataclass(frozen=True)
class ClarificationRequest:
    """A structured clarification request from a harness's ask-user channel."""

    question: str
    options: list[str] | None = None
    request_id: str | None = None
    raw: Any = None
    """The native request as received (recorded in the ledger)."""


@dataclass(frozen=True)
class ClarificationAnswer:
    """The simulated user's answer; ``option`` is the chosen label when options were offered."""

    text: str
    option: str | None
    matched: str | None
    """``value``, ``answers.<i>``, ``default`` or None (nothing declared matched)."""
    ledger_seq: int


class AskUserAnswer(StrictModel):
    """Answer ``answer`` when ``match`` (regex) is found in the question ('' matches any)."""

    match: str = ""
    answer: str


class AskUserTruth(StrictModel):
    """The ``ask_user`` entry of ``truth.json`` (a plain string is ``{answers: [{match: '', answer}]}``)."""

    answers: list[AskUserAnswer] = Field(default_factory=list)
    default: str | None = None


NO_ANSWER = "I don't have more information about that; please proceed with what you have."


@dataclass
class AskUserResponder:
    """Answers clarification requests from the task's private value, logging each exchange."""

    truth: AskUserTruth
    ledger: Ledger

    @classmethod
    def from_task(cls, task: TaskPack, run_private: Path) -> AskUserResponder:
        """Read ``truth.json``'s ``ask_user`` entry; log to ``<run_private>/ledgers/_ask_user.jsonl``.

        Raises:
            SimulatorConfigError: the entry is missing or malformed.
        """
        raw = task.truth.get("ask_user") if isinstance(task.truth, dict) else None
        if raw is None:
            raise SimulatorConfigError("truth.json", [
                "truth.json: no 'ask_user' entry; declare the private value the user answers with"])
        if isinstance(raw, str):
            raw = {"answers": [{"match": "", "answer": raw}]}
        try:
            truth = AskUserTruth.model_validate(raw)
        except ValidationError as exc:
            raise SimulatorConfigError("truth.json", [f"truth.json, field 'ask_user': {exc}"]) from exc
        ledger = Ledger(run_private / "ledgers" / f"{ASK_USER_SERVICE}.jsonl", ASK_USER_SERVICE)
        ledger.init()
        return cls(truth, ledger)

    def answer(self, request: ClarificationRequest) -> ClarificationAnswer:
        """Answer one request deterministically and record question and answer."""
        args = request.raw if request.raw is not None else {
            "question": request.question, "options": request.options}
        req = self.ledger.append("request", tool="ask_user", arguments=args, detail={
            "question": request.question, "options": request.options, "request_id": request.request_id})
        text, matched = NO_ANSWER, None
        for i, item in enumerate(self.truth.answers):
            if re.search(item.match, request.question):
                text, matched = item.answer, f"answers.{i}"
                break
        else:
            if self.truth.default is not None:
                text, matched = self.truth.default, "default"
        option = _pick_option(text, request.options) if matched else None
        if option is not None:
            text = option
        self.ledger.append("issued", tool="ask_user", detail={
            "answer": text, "option": option, "matched": matched, "request_seq": req["seq"]})
        return ClarificationAnswer(text=text, option=option, matched=matched, ledger_seq=int(req["seq"]))


def _pick_option(answer: str, options: list[str] | None) -> str | None:
    if not options:
        return None
    want = answer.casefold()
    for opt in options:
        if opt.casefold() == want:
            return opt
    for opt in options:
        if want in opt.casefold() or opt.casefold() in want:
            return opt
    return None
