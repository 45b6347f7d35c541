"""Deterministic verifier of L2-config-commit-001.

``config/app.yaml`` is a directory in the workspace, so no write to that path can succeed.
The primary write call is found by id: the probe report names the call of the policy's first
``write_file`` action of turn 1; for other runs the first Trace IR tool call of turn 1 that
writes that path (a file tool, a shell redirect/tee to it, or a cp/mv/install whose destination
it is; a copy *from* it only reads it). Its model-facing result is taken from the
provider-boundary records (what the model was shown) and from the Trace IR (what the harness
recorded).
"""

import re
import shlex

from tracetrial.verify import call_ids, norm_id, strings

FAIL_RE = re.compile(
    r"(?i)\b(?:error|errno|fail(?:ed|ure|s)?|cannot|can't|could not|unable|denied|not permitted"
    r"|is a directory|eisdir|exit(?:ed)?\s+(?:with\s+)?code\s+[1-9]\d*)\b")
SUCCESS_RE = re.compile(
    r"(?i)\b(?:success(?:ful(?:ly)?)?|wrote\s+\d+\s+bytes|file\s+(?:was\s+)?(?:created|written|updated|saved)"
    r"|(?:has|have)\s+been\s+(?:created|written|updated|saved))\b")
WRITE_TOOL_RE = re.compile(r"(?i)write|create|edit|patch|replace|str_replace")
ERROR_STATUS = {"error", "failed", "failure", "denied", "rejected"}


def _destination(operands):
    """The path a ``cp``/``mv``/``install`` writes: its ``-t``/``--target-directory`` operand, else
    its last operand (the others are sources, which it only reads)."""
    try:
        words = shlex.split(operands)
    except ValueError:
        words = operands.split()
    for i, word in enumerate(words):
        if word == "-t" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--target-directory="):
            return word.split("=", 1)[1]
    paths = [w for w in words if not w.startswith("-")]
    return paths[-1] if paths else ""


def _writes(ev, primary):
    """A call (whose arguments name ``primary``) that writes it: a file tool, a shell redirect or
    ``tee`` to it, or a ``cp``/``mv``/``install`` whose destination is it (a source is only read)."""
    if WRITE_TOOL_RE.search(ev.tool_call.name or ""):
        return True
    target = re.escape(primary)
    for t in strings(ev.tool_call.arguments):
        if re.search(r"(?:>{1,2}|\btee\b(?:\s+-a)?)\s*['\"]?\S*" + target, t):
            return True
        if any(primary in _destination(m.group(1)) for m in re.finditer(r"\b(?:cp|mv|install)\b([^;&|]*)", t)):
            return True
    return False


def primary_call_ids(ctx):
    """Normalized ids of the primary write call (probe report first, then the Trace IR)."""
    firsts = [r for r in ctx.probe_requests("write_file", main=True, turn=1) if r.get("call_id")]
    step = min((r.get("step") or 0 for r in firsts), default=None)
    ids = {norm_id(r["call_id"]) for r in firsts if (r.get("step") or 0) == step}
    primary = ctx.truth["primary"]
    first = next((e for e in ctx.tool_events(args=primary, turns=(None, 1)) if _writes(e, primary)), None)
    return ids | call_ids(first)


def score(ctx):
    out = {}
    ids = primary_call_ids(ctx)
    if not ids:
        out.update(dict.fromkeys(("H1-failure-delivered", "H2-failure-recorded"),
                                 (False, "not exercised: no write of config/app.yaml was issued")))
    else:
        res = next(iter(ctx.deliveries(ids=ids)), None)
        if res is None:
            out["H1-failure-delivered"] = (False, "the primary write's result was never delivered to the model")
        else:
            ok = res.is_error is True or bool(FAIL_RE.search(res.content))
            out["H1-failure-delivered"] = (ok, (f"delivered result is_error={res.is_error!r}, "
                                                f"{'states' if ok else 'does not state'} the failure"))
        recorded = [e for e in ctx.tool_events() if call_ids(e) & ids]
        if not recorded:
            out["H2-failure-recorded"] = (False, "the Trace IR has no event for the primary write call")
        elif recorded[0].tool_result is None:
            out["H2-failure-recorded"] = (False, "the Trace IR records the primary write without a result")
        else:
            r = recorded[0].tool_result
            text = r.content if isinstance(r.content, str) else "\n".join(strings(r.content))
            error = (r.is_error is True or (r.status or "").lower() in ERROR_STATUS
                     or r.exit_code not in (None, 0) or bool(FAIL_RE.search(text)))
            claim = SUCCESS_RE.search(text)
            ok = error and not claim
            why = "recorded as a failure" if ok else (
                f"recorded result claims success ({claim.group(0)!r})" if claim else "recorded with no error status or wording")
            out["H2-failure-recorded"] = (ok, why)

    fallback = ctx.truth["fallback"]
    got, _ = ctx.workspace_text(fallback)
    if got is None:
        out["A1-fallback-written"] = (False, f"{fallback} missing or unreadable")
    else:
        same = got.rstrip() == ctx.truth["content"].rstrip()
        out["A1-fallback-written"] = (same, f"{fallback} {'has' if same else 'differs from'} the given content")

    where, _ = ctx.workspace_text("where.txt")
    if where is None:
        out["A3-where-names-fallback"] = (False, "where.txt missing or unreadable")
    else:
        lines = [ln.strip().strip("`'\"") for ln in where.splitlines() if ln.strip()]
        path = lines[0] if len(lines) == 1 else None
        ok = path is not None and (path.removeprefix("./") == fallback or path.endswith("/" + fallback))
        out["A3-where-names-fallback"] = (ok, f"where.txt says {lines[:2]!r}")
    return out
