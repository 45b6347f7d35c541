"""The archive's redactor on raw JSON/JSONL text: a credential assignment is masked and nothing
after it is eaten (an escaped newline ends the value; an escaped backslash does not)."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tracetrial.redact import Redactor


def test_assignment_in_raw_json_keeps_the_text_after_the_escaped_newline() -> None:
    record = json.dumps({"content": "TT_DEPLOY_TOKEN=ttk_live_9f8e7d6c5b4a\n==> uploading 14 assets"})
    out = Redactor(set()).text(record)
    assert "ttk_live_9f8e7d6c5b4a" not in out
    assert json.loads(out)["content"].endswith("\n==> uploading 14 assets")


def test_an_escaped_backslash_stays_inside_the_masked_value() -> None:
    record = json.dumps({"content": "DB_PASSWORD=abc\\defghijk rest"})
    out = Redactor(set()).text(record)
    assert "defghijk" not in out and json.loads(out)["content"].endswith(" rest")


def _unguarded(redactor: Redactor, value: str) -> str:
    """What :meth:`Redactor.text` did before its patterns were guarded by their literals."""
    import re

    from tracetrial.redact import ASSIGNMENT_PATTERN, KEY_PATTERNS, REDACTED, encoded_forms

    for secret in sorted(redactor.values, key=len, reverse=True):
        for form in encoded_forms(secret):
            value = value.replace(form, REDACTED)
    if not redactor.patterns:
        return value
    for pattern in KEY_PATTERNS:
        value = pattern.sub(REDACTED, value)
    assert isinstance(ASSIGNMENT_PATTERN, re.Pattern)
    return ASSIGNMENT_PATTERN.sub(lambda m: m.group(1) + REDACTED, value)


def test_guarded_patterns_redact_exactly_what_the_patterns_do() -> None:
    """Each pattern runs only when a literal of every match is in the text: the output is the
    same as running every pattern, for matches of each pattern, near misses, case variants of
    ``Bearer`` (re's own case rules decide), and texts that mention the literals harmlessly."""
    import itertools

    pieces = ["sk-ant-" + "a" * 20, "task-specific reason", "xsk-" + "b" * 20, "AKIA" + "Q" * 16, "AKIA" + "q" * 16,
              "ghp_" + "c" * 36, "ghx_" + "c" * 36, "xoxb-" + "d" * 12, "BeArEr " + "e" * 20, "bearer\t" + "f" * 16,
              "BEARER short", "\u017fk-" + "g" * 20, "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----",
              "pk_live_" + "h" * 16, "rk_test_" + "i" * 16, "a_test_", "DEPLOY_TOKEN=" + "j" * 10, "API_KEY: " + "k" * 9,
              "token=lowercase-not-a-credential", "MY_PASSWD=" + "l" * 8, "planted-value", '"', "\\n", " "]
    for values in (set(), {"planted-value"}):
        for patterns in (True, False):
            redactor = Redactor(set(values), patterns)
            for a, b in itertools.product(pieces, repeat=2):
                for text in (a + b, a + " " + b, json.dumps({"k": a + b})):
                    assert redactor.text(text) == _unguarded(redactor, text), text


def test_values_added_after_use_are_redacted() -> None:
    """The encoded forms are cached per state of the value set, which is public and mutable."""
    redactor = Redactor({"first-secret"})
    assert redactor.text("first-secret second-secret") == "[REDACTED] second-secret"
    redactor.add("second-secret")
    assert redactor.text("first-secret second-secret") == "[REDACTED] [REDACTED]"
    redactor.values.add("third-secret")
    assert redactor.text("third-secret") == "[REDACTED]"


# Fragments that start, end or almost make a key pattern's literal or a planted secret: random
# strings of them reach every branch of the quick look (found / not found) and of the patterns.
_FRAGMENTS = ["sk-", "sk-ant-", "AKIA", "ghp_", "gho_", "xoxb-", "Bearer ", "bEaReR\t", "-----BEGIN ",
              "PRIVATE KEY-----", "-----END RSA ", "_live_", "_test_", "pay", "TOKEN", "API_KEY", "PASSW",
              "SECRET", "ACCESS_KEY", "=", ": ", "\\n", "\\\\", '"', "'", " ", "\n", "é", "abcdefghij",
              "ABCDEFGHIJKLMNOP", "0123456789", "s3cr3t", "-value-", "x", "ke", "n=", "sk", "AKI", "Bear"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=12), st.booleans())
@example(["bEaReR\t", "abcdefghij", "ABCDEFGHIJKLMNOP"], True)
@example(["x", "s3cr3t", "-value-", "123"], False)
@example(["pay", "_live_", "ABCDEFGHIJKLMNOP"], True)
def test_the_quick_look_changes_no_redaction(parts: list[str], patterns: bool) -> None:
    """A short string the one-search look finds nothing in is returned as it is; everything
    else takes the full path: the same output as the full path alone, string by string."""
    import tracetrial.redact as redact

    text = "".join(parts)
    quick = Redactor({"s3cr3t-value-123", 'quo"te\\secret'}, patterns=patterns)
    full = Redactor({"s3cr3t-value-123", 'quo"te\\secret'}, patterns=patterns)
    saved = redact._QUICK_MAX
    try:
        redact._QUICK_MAX = -1
        expected = full.text(text)
    finally:
        redact._QUICK_MAX = saved
    assert quick.text(text) == expected


def test_the_quick_look_follows_patterns_switched_on_after_use() -> None:
    """``patterns`` is public and set after construction (the gateway's recorder turns it off):
    a look built without the key-pattern literals is not reused once they count again."""
    redactor = Redactor(set(), patterns=False)
    key = "sk-" + "a" * 24
    assert redactor.text(key) == key
    redactor.patterns = True
    assert redactor.text(key) == "[REDACTED]"
