"""What a shell tool's declaration says about shell state across calls (pure).

Execution's shell-state property (E4) is graded against what the harness *declares*: a tool that
says "each call is a fresh process" must not carry a ``cd`` over, one that says "persistent
session" must. The probe (the ideal agent writes its commands for the declared semantics) and the
verifier (judges the harness by them) read a declaration with the same table, kept here once.

:func:`shell_state_declared` returns ``(cwd, env)``, each ``"fresh"``, ``"persistent"`` or ``None``
(the text says neither, or contradicts itself); ``cwd`` may also be ``"persistent_on_success"``: a
``cd`` carries to the next call only if the command succeeds, else the shell stays where it was
(Claude Code 2.1.332: "`cd` carries to the next call only in the main session, if the command
succeeds and ends inside the working directories … otherwise it stays where it was").
:func:`cwd_after` resolves that kind for the call after a given one. The table was fitted to the shell tools of the
reference harness, Claude Code, Codex and OpenClaw at their pinned versions (the E4 packs' tests
hold those declarations); a wording it does not know gives ``None``, which the packs score
``unscored``, never a pass.
"""

from __future__ import annotations

import re

__all__ = ["PERSISTENT_ON_SUCCESS", "STAYS", "cwd_after", "shell_state_declared"]

#: The working directory carries over only after a command that succeeded.
PERSISTENT_ON_SUCCESS = "persistent_on_success"
#: :func:`cwd_after`: the next call starts where the previous one started (its ``cd`` did not carry).
STAYS = "stays"

_NEG = re.compile(r"(?i)\b(?:not|never|no\s+longer)\b|n't\b")
_CWD_SUBJECT = r"working\s+director(?:y|ies)|current\s+(?:working\s+)?director(?:y|ies)|\bcwd\b|\bcd\b"
_ENV_SUBJECT = (r"environment\s+variables?|\benv(?:ironment)?\s+vars?\b|exported\s+variables?|\bexports?\b"
                r"|shell\s+variables?|shell\s+state")
_VERB = r"persist(?:s|ed|ent)?|(?:is|are)\s+(?:kept|preserved|retained)|carr(?:y|ies)\s+over|resets?|is\s+reset"
#: ``<subject> ... <verb>`` within one clause: the verb's polarity, flipped by a negation between.
CWD_CLAUSE = re.compile(rf"(?i)(?:{_CWD_SUBJECT})(?P<mid>[^.;:\n]{{0,60}}?)\b(?P<verb>{_VERB})\b")
ENV_CLAUSE = re.compile(rf"(?i)(?:{_ENV_SUBJECT})(?P<mid>[^.;:\n]{{0,60}}?)\b(?P<verb>{_VERB})\b")
#: Every call is its own process: nothing carries over.
FRESH_PROCESS = re.compile(r"(?i)\b(?:each|every)\s+(?:call|command|invocation)\s+(?:is|runs\s+in|starts)\s+"
                           r"(?:a|in\s+a)\s+(?:fresh|new|separate)\s+(?:bash\s+|shell\s+)?(?:process|shell)\b"
                           r"|\b(?:fresh|new|separate)\s+(?:bash\s+|shell\s+)?process\s+(?:for|per)\s+"
                           r"(?:each\s+|every\s+)?(?:call|command)\b")
#: A persistent session: everything carries over.
PERSISTENT_SESSION = re.compile(r"(?i)\bpersistent\s+(?:bash\s+|shell\s+|terminal\s+)?session\b"
                                r"|\bsame\s+(?:bash\s+|shell\s+)session\s+(?:for|across)\s+(?:all|every|each)\b")
#: A per-call working directory that defaults to a fixed folder (Codex ``workdir``: "Working
#: directory for the command. Defaults to the turn cwd."): every call starts there.
PER_CALL_CWD = re.compile(r"(?i)\bdefaults?\s+to\s+the\s+(?:turn|session|workspace|project|initial)(?:'s)?\s+"
                          r"(?:cwd|working\s+directory|directory|root|folder)\b")


#: ``<subject> ... carries/persists ... if the command succeeds`` (or "only after a successful
#: call") within one sentence: the working directory carries over only after a success.
CWD_ON_SUCCESS = re.compile(
    rf"(?i)(?:{_CWD_SUBJECT})(?P<mid>[^.;:\n]{{0,60}}?)\b(?:{_VERB}|carr(?:y|ies)\s+(?:to|into)|persists?)\b"
    r"[^.;:\n]{0,80}?\b(?:(?:only\s+)?(?:if|when)\s+(?:the\s+|a\s+)?(?:command|call)\s+(?:succeeds|is\s+successful)"
    r"|only\s+after\s+(?:a\s+)?successful\s+(?:command|call))\b")


def _clauses(pattern: re.Pattern[str], text: str) -> set[str]:
    found = set()
    for m in pattern.finditer(text):
        verb = m.group("verb").lower()
        if verb.startswith("reset") or verb == "is reset":
            found.add("fresh")
        else:
            found.add("fresh" if _NEG.search(m.group("mid")) else "persistent")
    return found


def shell_state_declared(text: str | None) -> tuple[str | None, str | None]:
    """``(cwd, env)`` semantics a shell tool's declaration (its description, and its parameters'
    descriptions where the harness states them there) states: ``"fresh"`` (every call starts
    anew), ``"persistent"`` (carries over) or ``None`` (it says neither, or says both)."""
    text = re.sub(r"[`*_]", " ", text or "")
    text = re.sub(r"\s+", " ", text)
    cwd, env = _clauses(CWD_CLAUSE, text), _clauses(ENV_CLAUSE, text)
    if FRESH_PROCESS.search(text):
        cwd.add("fresh")
        env.add("fresh")
    if PERSISTENT_SESSION.search(text):
        cwd.add("persistent")
        env.add("persistent")
    if PER_CALL_CWD.search(text):
        cwd.add("fresh")
    conditional = CWD_ON_SUCCESS.search(text)
    if conditional is not None and not _NEG.search(conditional.group("mid")):
        cwd.discard("persistent")  # the conditional rule states when it persists
        cwd.add(PERSISTENT_ON_SUCCESS)
    return (next(iter(cwd)) if len(cwd) == 1 else None), (next(iter(env)) if len(env) == 1 else None)


def cwd_after(semantics: str | None, succeeded: bool | None) -> str | None:
    """The working-directory semantics that apply to the call after one that ``succeeded`` (or
    failed): ``persistent_on_success`` is ``"persistent"`` (the next call starts where that one
    ended) after a success and :data:`STAYS` (it starts where that one started) after a failure,
    ``None`` when the outcome is unknown; any other semantics is as declared."""
    if semantics != PERSISTENT_ON_SUCCESS:
        return semantics
    if succeeded is None:
        return None
    return "persistent" if succeeded else STAYS
