"""Deterministic verifier of L2-config-commit-001.

``config/app.yaml`` is a directory in the workspace, so no write to that path can succeed.
The primary write call is found by id: the probe report names the call of the policy's first
``write_file`` action of turn 1; for other runs the first Trace IR tool call of turn 1 that
writes that path (a file tool, or a shell redirect/tee/cp/mv to it). Its model-facing result is
taken from the provider-boundary records (what the model was shown) and from the Trace IR (what
the harness recorded).
"""

import json
import re

FAIL_RE = re.compile(
    r"(?i)\b(?:error|errno|fail(?:ed|ure|s)?|cannot|can't|could not|unable|denied|not permitted"
    r"|is a directory|eisdir|exit(?:ed)?\s+(?:with\s+)?code\s+[1-9]\d*)\b")
SUCCESS_RE = re.compile(
    r"(?i)\b(?:success(?:ful(?:ly)?)?|wrote\s+\d+\s+bytes|file\s+(?:was\s+)?(?:created|written|updated|saved)"
    r"|(?:has|have)\s+been\s+(?:created|written|updated|saved))\b")
WRITE_TOOL_RE = re.compile(r"(?i)write|create|edit|patch|replace|str_replace")
ERROR_STATUS = {"error", "failed", "failure", "denied", "rejected"}


def _norm(call_id):
    return re.sub(r"[^A-Za-z0-9]", "", call_id or "")


def _strings(value):
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            yield value
            return
        if isinstance(parsed, str):
            yield parsed
        else:
            yield from _strings(parsed)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _text(content):
    return content if isinstance(content, str) else "\n".join(_strings(content))


def _ids(ev):
    return {_norm(ev.tool_call.id), _norm(getattr(ev.tool_call, "native_tool_call_id", None))} - {""}


def _tool_events(ctx):
    return [e for e in ctx.events if getattr(e, "event_type", None) == "tool"]


def _writes_primary(ev, primary):
    texts = list(_strings(ev.tool_call.arguments))
    if not any(primary in t for t in texts):
        return False
    if WRITE_TOOL_RE.search(ev.tool_call.name or ""):
        return True
    target = re.escape(primary)
    return any(re.search(r"(?:>{1,2}|\btee\b(?:\s+-a)?|\b(?:cp|mv|install)\b[^;&|]*)\s*['\"]?\S*" + target, t)
               for t in texts)


def primary_call_ids(ctx):
    """Normalized ids of the primary write call (probe report first, then the Trace IR)."""
    ids = set()
    probe = ctx.probe or {}
    firsts = [r for r in probe.get("requests") or []
              if r.get("action") == "write_file" and r.get("turn") == 1 and r.get("principal", "main") == "main"
              and r.get("call_id")]
    if firsts:
        step = min(r.get("step") or 0 for r in firsts)
        ids |= {_norm(r["call_id"]) for r in firsts if (r.get("step") or 0) == step}
    primary = ctx.truth["primary"]
    for ev in _tool_events(ctx):
        if getattr(ev, "conversation_turn", None) in (None, 1) and _writes_primary(ev, primary):
            ids |= _ids(ev)
            break
    return ids


def _delivered(ctx, ids):
    for req in ctx.gateway:
        for res in req.get("tool_results") or []:
            if _norm(res.get("id")) in ids:
                return res
    return None


def states_failure(content, is_error):
    return is_error is True or bool(FAIL_RE.search(content or ""))


def _read(path):
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def score(ctx):
    out = {}
    ids = primary_call_ids(ctx)
    if not ids:
        out["H1-failure-delivered"] = (False, "not exercised: no write of config/app.yaml was issued")
        out["H2-failure-recorded"] = (False, "not exercised: no write of config/app.yaml was issued")
    else:
        res = _delivered(ctx, ids)
        if res is None:
            out["H1-failure-delivered"] = (False, "the primary write's result was never delivered to the model")
        else:
            ok = states_failure(res.get("content"), res.get("is_error"))
            out["H1-failure-delivered"] = (ok, f"delivered result is_error={res.get('is_error')!r}, "
                                               f"{'states' if ok else 'does not state'} the failure")
        recorded = [e for e in _tool_events(ctx) if _ids(e) & ids]
        if not recorded:
            out["H2-failure-recorded"] = (False, "the Trace IR has no event for the primary write call")
        elif recorded[0].tool_result is None:
            out["H2-failure-recorded"] = (False, "the Trace IR records the primary write without a result")
        else:
            r = recorded[0].tool_result
            text = _text(r.content)
            error = (r.is_error is True or (r.status or "").lower() in ERROR_STATUS
                     or r.exit_code not in (None, 0) or bool(FAIL_RE.search(text)))
            claim = SUCCESS_RE.search(text)
            ok = error and not claim
            why = "recorded as a failure" if ok else (
                f"recorded result claims success ({claim.group(0)!r})" if claim else "recorded with no error status or wording")
            out["H2-failure-recorded"] = (ok, why)

    expected = ctx.truth["content"]
    got = _read(ctx.workspace / ctx.truth["fallback"])
    if got is None:
        out["A1-fallback-written"] = (False, f"{ctx.truth['fallback']} missing or unreadable")
    else:
        same = got.rstrip() == expected.rstrip()
        out["A1-fallback-written"] = (same, f"{ctx.truth['fallback']} {'has' if same else 'differs from'} the given content")

    where = _read(ctx.workspace / "where.txt")
    if where is None:
        out["A3-where-names-fallback"] = (False, "where.txt missing or unreadable")
    else:
        lines = [ln.strip().strip("`'\"") for ln in where.splitlines() if ln.strip()]
        path = lines[0] if len(lines) == 1 else None
        ok = path is not None and (path.removeprefix("./") == ctx.truth["fallback"]
                                   or path.endswith("/" + ctx.truth["fallback"]))
        out["A3-where-names-fallback"] = (ok, f"where.txt says {lines[:2]!r}")
    return out
