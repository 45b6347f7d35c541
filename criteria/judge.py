"""The semantic judge: a fixed prompt, LiteLLM or a replay source, strict parsing.

A judge is anything with a ``name`` and ``complete(messages) -> str`` that raises
:class:`~criteria.errors.JudgeError` when it cannot answer:

* :class:`LiteLLMJudge` calls ``litellm.completion`` (model alias configurable;
  the paper used deepseek-v4-flash for every run);
* :class:`CassetteJudge` replays recorded responses keyed by the SHA-256 of the
  prompt (tests, offline re-scoring), optionally recording from another judge;
* :class:`ArchivedJudge` replays a run's own ``evidence/judge/*.json`` records,
  which is how ``rescore`` reproduces a judged run without calling a model.

:func:`parse_response` accepts one JSON object (optionally in a code fence) with
``state``, ``rationale`` and ``citations``; anything else — not JSON, a state
the layer does not allow, a citation that is not a ref of the packet (also
``seq N`` mentioned in the rationale) — is a :class:`MalformedJudgeOutput`,
and the criterion becomes unscored with that reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from criteria.errors import CriteriaError, JudgeError

TEMPLATE_VERSION = "tt-judge/1"
DEFAULT_JUDGE_MODEL = "deepseek-v4-flash"
CASSETTE_SCHEMA = "tt-judge-cassette/1"

Messages = list[dict[str, str]]

SYSTEM_PROMPT = (
    "You are the TraceTrial judge. You decide whether ONE criterion of an agent-harness "
    "benchmark run holds, using ONLY the bounded evidence packet below. The packet is a "
    "deterministic selection from the run archive: long strings are reduced to head/tail "
    "fragments plus keyword windows, long collections carry an explicit reduction record, and "
    "the counts say how much was scanned, matched and returned. Do not assume anything the "
    "packet does not show; no supporting evidence means state 0.\n\n"
    "Answer with one JSON object and nothing else:\n"
    '{"state": <integer>, "rationale": "<one short paragraph citing evidence refs>", '
    '"citations": ["<ref>", ...]}\n'
    'Every citation must be a "ref" value that appears in the packet (trace events are '
    '"seq:<n>"). Never cite anything else.'
)

STATES: dict[str, dict[int, str]] = {
    "agent": {
        0: "the criterion does not hold, or the packet shows no supporting evidence",
        1: "the criterion holds, shown by cited evidence",
    },
    "harness": {
        0: "the criterion does not hold, or the packet shows no supporting evidence",
        1: "the criterion holds, shown by cited evidence",
        2: "the target path of this criterion was not exercised in this run",
        3: "the harness faulted on this criterion (a harness fault, shown by cited evidence)",
    },
}


class Judge(Protocol):
    """A semantic judge. ``name`` is recorded in ``combined_score.json``."""

    name: str | None

    def complete(self, messages: Messages) -> str:
        """The raw response text. Raises :class:`JudgeError` when there is none."""
        ...


class MalformedJudgeOutput(CriteriaError):
    """The judge answered, but not with a valid verdict."""


@dataclass(frozen=True)
class JudgeVerdict:
    state: int
    rationale: str
    citations: list[str]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1)


def prompt_messages(*, criterion_id: str, layer: str, statement: str, component: str | None,
                    trigger: str, packet: dict[str, Any],
                    agent_context: list[dict[str, Any]] | None = None) -> Messages:
    """The fixed prompt (system + user). Agent verdicts are given to harness criteria only."""
    states = "\n".join(f"{k} = {v}" for k, v in STATES[layer].items())
    shown = {k: packet[k] for k in ("scanned", "matched", "returned", "truncated", "empty_selection",
                                    "unavailable_sources", "records") if k in packet}
    parts = [
        f"Layer: {layer}",
        f"Criterion id: {criterion_id}",
        f"Component: {component or '-'}",
        f"Trigger: {trigger}",
        f"Statement: {statement}",
        "",
        f"Allowed states:\n{states}",
        "",
        f"Evidence packet (JSON):\n{_dumps(shown)}",
    ]
    if layer == "harness" and agent_context is not None:
        parts += ["", "Downstream context: the finished agent-layer verdicts of this run. They describe "
                  "the outcome; they are NOT evidence that this harness criterion failed.\n"
                  + _dumps(agent_context)]
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(parts)}]


def prompt_hash(messages: Messages) -> str:
    """SHA-256 of the canonical JSON of the prompt (the cassette and archive key)."""
    text = json.dumps(messages, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL)
_SEQ_CITATION = re.compile(r"^(?:seq\s*[:#=]?\s*|#)?(\d+)$", re.IGNORECASE)
_SEQ_MENTION = re.compile(r"\bseq\s*[:#=]?\s*(\d+)", re.IGNORECASE)


def _normalize_ref(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"seq:{value}"
    if not isinstance(value, str):
        raise MalformedJudgeOutput(f"citation {value!r} is not a string or an event seq")
    m = _SEQ_CITATION.match(value.strip())
    return f"seq:{m.group(1)}" if m else value.strip()


def parse_response(text: str, layer: str, refs: list[str]) -> JudgeVerdict:
    """Parse and check one judge response against the packet's refs.

    Raises:
        MalformedJudgeOutput: not a JSON object, a state outside the layer's set, no
            rationale, or a citation (or a ``seq N`` in the rationale) not in the packet.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise MalformedJudgeOutput(f"judge output is not JSON ({exc.msg} at char {exc.pos})") from None
    if not isinstance(data, dict):
        raise MalformedJudgeOutput(f"judge output is JSON {type(data).__name__}, expected an object")
    state = data.get("state")
    allowed = sorted(STATES[layer])
    if isinstance(state, bool) or not isinstance(state, int) or state not in STATES[layer]:
        raise MalformedJudgeOutput(f"state {state!r} is not allowed for the {layer} layer (allowed: {allowed})")
    rationale = data.get("rationale")
    if not isinstance(rationale, str) or not rationale.strip():
        raise MalformedJudgeOutput("rationale is missing or empty")
    raw = data.get("citations", [])
    if not isinstance(raw, list):
        raise MalformedJudgeOutput("citations must be a list of packet refs")
    citations = [_normalize_ref(c) for c in raw]
    mentioned = [f"seq:{m}" for m in _SEQ_MENTION.findall(rationale)]
    known = set(refs)
    invented = [c for c in dict.fromkeys([*citations, *mentioned]) if c not in known]
    if invented:
        raise MalformedJudgeOutput(f"citation(s) not in the evidence packet: {', '.join(invented[:5])}")
    return JudgeVerdict(state=state, rationale=rationale.strip(), citations=list(dict.fromkeys(citations)))


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


class LiteLLMJudge:
    """A live judge through ``litellm.completion`` (deterministic settings: temperature 0)."""

    def __init__(self, model: str = DEFAULT_JUDGE_MODEL, *, api_base: str | None = None,
                 api_key: str | None = None, temperature: float = 0.0, timeout: float = 120.0,
                 max_tokens: int = 1024, num_retries: int = 2, **litellm_kwargs: Any):
        self.name: str | None = model
        self.model = model
        self.kwargs = {"api_base": api_base, "api_key": api_key, "temperature": temperature,
                       "timeout": timeout, "max_tokens": max_tokens, "num_retries": num_retries,
                       **litellm_kwargs}

    def complete(self, messages: Messages) -> str:
        # Without this LiteLLM fetches a price map from the internet at import (HARNESSES.md).
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        try:
            import litellm

            litellm.suppress_debug_info = True  # no "Give Feedback" banners in test/CLI output
            kwargs = {k: v for k, v in self.kwargs.items() if v is not None}
            response = litellm.completion(model=self.model, messages=messages, **kwargs)
            content = response.choices[0].message.content
        except Exception as exc:  # noqa: BLE001 - unreachable, auth, rate limit, bad route: all unscored
            raise JudgeError(f"judge {self.model!r} unreachable: {_first_line(exc)}") from None
        if not isinstance(content, str) or not content.strip():
            raise JudgeError(f"judge {self.model!r} returned an empty response")
        return content


class CassetteJudge:
    """Replays responses recorded in a JSON cassette, keyed by :func:`prompt_hash`.

    File format: ``{"schema": "tt-judge-cassette/1", "model": str|null,
    "entries": {<prompt sha256>: {"response": str}}}``. With ``record`` set, a missing
    entry is fetched from that judge and saved.
    """

    def __init__(self, path: Path, *, name: str | None = None, record: Judge | None = None):
        self.path = Path(path)
        self.record = record
        data: dict[str, Any] = {}
        if self.path.is_file():
            data = json.loads(self.path.read_text(encoding="utf-8"))
        self.entries: dict[str, dict[str, Any]] = dict(data.get("entries", {}))
        self.name = name or data.get("model") or (record.name if record else None) or f"cassette:{self.path.name}"

    def complete(self, messages: Messages) -> str:
        key = prompt_hash(messages)
        entry = self.entries.get(key)
        if entry is not None:
            return str(entry["response"])
        if self.record is None:
            raise JudgeError(f"no cassette entry for prompt {key[:16]} in {self.path.name}")
        response = self.record.complete(messages)
        self.entries[key] = {"response": response}
        self.save()
        return response

    def add(self, messages: Messages, response: str) -> str:
        """Store a response for a prompt (tests build cassettes this way); returns the key."""
        key = prompt_hash(messages)
        self.entries[key] = {"response": response}
        return key

    def save(self) -> None:
        data = {"schema": CASSETTE_SCHEMA, "model": self.name, "entries": dict(sorted(self.entries.items()))}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


class ArchivedJudge:
    """Replays a run's archived judge records (``evidence/judge/*.json``) by prompt hash.

    An archived error is replayed as the same error, so a re-score of a run whose
    judge was unreachable reproduces the same unscored reasons.
    """

    def __init__(self, records: list[dict[str, Any]]):
        self.by_hash = {r["prompt_sha256"]: r for r in records if isinstance(r.get("prompt_sha256"), str)}
        models = sorted({r["model"] for r in records if isinstance(r.get("model"), str)})
        self.name: str | None = models[0] if len(models) == 1 else None

    @classmethod
    def from_run(cls, run_dir: Path) -> ArchivedJudge:
        folder = Path(run_dir) / "evidence" / "judge"
        records = []
        if folder.is_dir() and not folder.is_symlink():
            for path in sorted(folder.glob("*.json")):
                try:
                    value = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, json.JSONDecodeError):
                    continue
                if isinstance(value, dict):
                    records.append(value)
        return cls(records)

    def complete(self, messages: Messages) -> str:
        record = self.by_hash.get(prompt_hash(messages))
        if record is None:
            raise JudgeError("no archived judge response for this prompt (packet or template changed)")
        if isinstance(record.get("response"), str):
            return str(record["response"])
        raise JudgeError(str(record.get("error") or "the archived judge call has no response"))


def _registry_route(alias: str) -> tuple[str, str | None, str | None] | None:
    """``(litellm model, api_base, key env)`` of a live ``models.yaml`` alias, else None."""
    try:
        from apparatus.gateway.registry import ModelRegistry

        entry = ModelRegistry.load().models.get(alias)
    except Exception:  # noqa: BLE001 - no registry here: the alias goes to LiteLLM as given
        return None
    if entry is None or entry.kind != "live" or entry.translation is None:
        return None
    model = f"{entry.translation.provider}/{entry.model or alias}"
    return model, entry.translation.api_base, entry.key_env


def make_judge(spec: str | None) -> Judge | None:
    """A judge from a CLI/option string.

    ``none``/empty: no judge; ``cassette:<path>`` or an existing ``.json`` file: replay;
    a ``models.yaml`` alias (e.g. ``deepseek-v4-flash``, the paper's judge): LiteLLM with
    the alias's provider, base URL and key; anything else: a LiteLLM model string.
    ``TT_JUDGE_API_BASE`` / ``TT_JUDGE_API_KEY`` override the base URL and key.
    """
    if spec is None or spec.strip().lower() in ("", "none", "off"):
        return None
    if spec.startswith("cassette:"):
        return CassetteJudge(Path(spec.removeprefix("cassette:")))
    if spec.endswith(".json") and Path(spec).is_file():
        return CassetteJudge(Path(spec))
    route = _registry_route(spec)
    model, api_base, key_env = route if route is not None else (spec, None, None)
    key = os.environ.get("TT_JUDGE_API_KEY") or (os.environ.get(key_env) if key_env else None)
    judge = LiteLLMJudge(model, api_base=os.environ.get("TT_JUDGE_API_BASE") or api_base, api_key=key)
    judge.name = spec  # the configured alias is what combined_score.json records
    return judge
