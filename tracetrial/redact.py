"""Recursive redaction of credentials (SPEC §9).

The archive writer passes every JSON value and every text file through a
:class:`Redactor` built from the values of known credential environment
variables, the task's planted secrets and common key patterns.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

REDACTED = "[REDACTED]"

#: Environment variables whose values are credentials wherever they appear.
CREDENTIAL_ENV_VARS = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "DEEPSEEK_API_KEY",
    "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENROUTER_API_KEY", "LITELLM_MASTER_KEY",
    "TT_GATEWAY_KEY", "TT_JUDGE_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "GITHUB_TOKEN", "GH_TOKEN", "HF_TOKEN",
)

#: Common key shapes (provider keys, bearer tokens, AWS ids, private key blocks), each with
#: literals one of which every match contains (see :data:`_GUARDS`).
_GUARDED_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    # Not preceded by a word character: "desk-", "task-", "risk-" followed by a long slug are
    # words, not keys (a redacted "task-export-…" would corrupt the very records it protects).
    (re.compile(r"(?<![A-Za-z0-9_])sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"), ("sk-",)),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), ("AKIA",)),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}\b"), ("xox",)),
    (re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._\-]{16,}"), ("bearer",)),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"), ("-----BEGIN ",)),
    # Live/test keys in the common "<prefix>_live_<random>" shape (payment and deploy APIs).
    (re.compile(r"\b[a-z]{2,8}_(?:live|test)_[A-Za-z0-9]{16,}\b"), ("_live_", "_test_")),
)
KEY_PATTERNS: tuple[re.Pattern[str], ...] = tuple(pattern for pattern, _ in _GUARDED_PATTERNS)

#: The value of a credential-named assignment (``DEPLOY_TOKEN=...``, ``API_KEY: ...``);
#: the name is kept so the record still says *which* credential was there.
#: Only environment-style UPPER_CASE names count: prose such as "stamp token: X" is not a
#: credential assignment.
ASSIGNMENT_PATTERN = re.compile(
    r"(\b(?:[A-Z][A-Z0-9_]*_)?(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY)\s*[=:]\s*)"
    # The value ends at whitespace, a quote or a comma, and also at a JSON escape (``\n``, ``\"``...):
    # the archive redacts raw JSON/JSONL text, where an escaped newline is not part of the value
    # (without this stop "TOKEN=abc…\n==> next" lost the text after the newline). An escaped
    # backslash (``\\``) stays part of the value.
    r"((?:[^\s'\",\\]|\\\\|\\(?![nrtbfu\"/\\])){8,})"
)


def _guard(pattern: re.Pattern[str], needles: tuple[str, ...]) -> Callable[[str], bool]:
    """``text -> False`` only when ``pattern`` cannot match ``text``: none of ``needles`` (literals
    one of which every match contains) is in it. Case-insensitive literals are looked for by re
    itself, with the pattern's own case rules."""
    if pattern.flags & re.IGNORECASE:
        finder = re.compile("|".join(re.escape(n) for n in needles), re.IGNORECASE)
        return lambda text: finder.search(text) is not None
    return lambda text: any(n in text for n in needles)


#: Why a pattern may be skipped (a speed-up, never a change of output): re scans a pattern that
#: opens with ``\b`` or a look-behind position by position (tens of ms over a cell's few hundred
#: KB), while ``in`` finds a literal at memory speed. A text holding none of a pattern's literals
#: is left unchanged by that pattern's substitution, so skipping it gives the same text. A pattern
#: without a guard here is always applied.
_NEEDLES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    *_GUARDED_PATTERNS,
    # the name group is mandatory: TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY|ACCESS_KEY
    (ASSIGNMENT_PATTERN, ("TOKEN", "SECRET", "PASSW", "API_KEY", "APIKEY", "ACCESS_KEY")),
)
_GUARDS: dict[re.Pattern[str], Callable[[str], bool]] = {pattern: _guard(pattern, needles)
                                                         for pattern, needles in _NEEDLES}


#: Every literal a key pattern's match contains (:data:`_NEEDLES`), as alternatives of one
#: expression (with the pattern's own case rule): a string none of them is in is left unchanged
#: by every pattern.
_LITERALS: tuple[str, ...] = tuple(
    f"(?i:{re.escape(n)})" if pattern.flags & re.IGNORECASE else re.escape(n)
    for pattern, needles in _NEEDLES for n in needles)
#: Strings up to this long are first looked at with one search for any literal (see
#: :meth:`Redactor.text`): one call instead of a dozen for the short strings a JSON record is
#: mostly made of; longer ones go straight to the per-pattern guards, whose ``in`` scans faster.
_QUICK_MAX = 512


def _may_match(pattern: re.Pattern[str], text: str) -> bool:
    """False only when ``pattern`` cannot match ``text`` (see :data:`_GUARDS`)."""
    guard = _GUARDS.get(pattern)
    return guard is None or guard(text)


#: Mapping keys whose values are always dropped (auth material).
SENSITIVE_KEYS = frozenset({"authorization", "x-api-key", "api-key", "api_key", "apikey", "cookie"})


def encoded_forms(secret: str) -> list[str]:
    """``secret`` as it appears in text: itself, and as written inside a JSON string (with
    escapes, ASCII-only or not), longest first. A provider request body or a JSON record
    holds the escaped form of a value with quotes, backslashes or non-ASCII characters."""
    forms = {secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    return sorted(forms, key=len, reverse=True)


@dataclass
class Redactor:
    """Replaces known secret values and key-shaped strings with ``[REDACTED]``.

    ``patterns=False`` replaces the known values only (no key-shaped strings): for a
    recorder that must keep what it records exact except for the secrets it was given.
    """

    #: Out of the repr: a traceback that shows a redactor must not show what it redacts.
    values: set[str] = field(default_factory=set, repr=False)
    patterns: bool = True
    #: ``(values in iteration order, their encoded forms in replacement order)``: computed once
    #: per state of ``values`` instead of per string (the writer redacts thousands of strings a
    #: cell, each formerly sorting the values and JSON-encoding each of them twice).
    _forms_cache: tuple[tuple[str, ...], tuple[str, ...]] | None = field(default=None, init=False, repr=False,
                                                                          compare=False)
    #: ``(the forms and the patterns flag it was built from, one expression finding any form
    #: or key-pattern literal)``: ``patterns`` is public and set after construction, too.
    _quick_cache: tuple[tuple[str, ...], bool, re.Pattern[str]] | None = field(default=None, init=False,
                                                                               repr=False, compare=False)

    @classmethod
    def from_environment(cls, extra: Iterable[str] = (), env: Mapping[str, str] | None = None) -> Redactor:
        """Secrets from credential env vars (values of 8+ chars) plus ``extra``."""
        env = os.environ if env is None else env
        values = {env[k] for k in CREDENTIAL_ENV_VARS if len(env.get(k, "")) >= 8}
        values |= {v for v in extra if v and len(v) >= 4}
        return cls(values)

    def add(self, *values: str) -> None:
        self.values.update(v for v in values if v and len(v) >= 4)

    def _forms(self) -> tuple[str, ...]:
        """Every encoded form of every value, in the order :meth:`text` replaces them: secrets
        longest first (a secret containing another is removed whole), each secret's forms
        longest first. Recomputed whenever ``values`` changes (it is a public, mutable set)."""
        key = tuple(self.values)
        if self._forms_cache is None or self._forms_cache[0] != key:
            forms = tuple(form for secret in sorted(key, key=len, reverse=True) for form in encoded_forms(secret))
            self._forms_cache = (key, forms)
        return self._forms_cache[1]

    def _quick(self, forms: tuple[str, ...]) -> re.Pattern[str]:
        """One expression that finds every known secret form and every key-pattern literal:
        a string it finds nothing in is one :meth:`text` leaves unchanged."""
        cache = self._quick_cache
        if cache is None or cache[0] is not forms or cache[1] != self.patterns:
            literals = (*(re.escape(f) for f in forms), *(_LITERALS if self.patterns else ()))
            cache = self._quick_cache = (forms, self.patterns, re.compile("|".join(literals) or "(?!)"))
        return cache[2]

    def text(self, value: str) -> str:
        """Redact one string."""
        forms = self._forms()
        if len(value) <= _QUICK_MAX and self._quick(forms).search(value) is None:
            return value  # nothing that a form or a pattern could match is in it
        for form in forms:
            if form in value:
                value = value.replace(form, REDACTED)
        if not self.patterns:
            return value
        for pattern in KEY_PATTERNS:
            if _may_match(pattern, value):
                value = pattern.sub(REDACTED, value)
        if not _may_match(ASSIGNMENT_PATTERN, value):
            return value
        return ASSIGNMENT_PATTERN.sub(lambda m: m.group(1) + REDACTED, value)

    def value(self, obj: Any) -> Any:
        """Redact a JSON-like value recursively (keys are redacted too)."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            out: dict[Any, Any] = {}
            for k, v in obj.items():
                key = self.text(k) if isinstance(k, str) else k
                if isinstance(k, str) and k.lower() in SENSITIVE_KEYS and v:
                    out[key] = REDACTED
                else:
                    out[key] = self.value(v)
            return out
        if isinstance(obj, (list, tuple)):
            return [self.value(v) for v in obj]
        return obj

    def bytes_(self, data: bytes) -> bytes:
        """Redact a file's bytes when it decodes as UTF-8; binary data is returned unchanged
        (and checked for the raw secret bytes by :meth:`leaks`)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            for secret in self.values:
                for form in encoded_forms(secret):
                    data = data.replace(form.encode(), REDACTED.encode())
            return data
        return self.text(text).encode("utf-8")

    def leaks(self, data: bytes) -> list[str]:
        """Which known secret values (masked) still occur in ``data``."""
        found = []
        for secret in self.values:
            if any(form.encode() in data for form in encoded_forms(secret)):
                found.append(secret[:3] + "…")
        return found


def occurrences(data: bytes, secrets: Iterable[str]) -> list[int]:
    """How often each of ``secrets`` (in order) occurs in ``data``, in any of its
    :func:`encoded_forms`: evidence of where a secret went, taken before it is redacted."""
    return [sum(data.count(form.encode()) for form in encoded_forms(secret)) if secret else 0
            for secret in secrets]
