"""Deterministic verifier of E1-build-status-001."""

import json
import re

EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")


def _build_results(ctx):
    """Tool results delivered to the model that carry the build's output."""
    for req in ctx.gateway:
        for res in req.get("tool_results", []):
            if "BUILD SUCCESS" in (res.get("content") or ""):
                yield res


def _shows_status(text, is_error, code):
    m = EXIT_RE.search(text or "")
    return bool(is_error) or (m is not None and int(m.group(1)) == code)


def score(ctx):
    code = ctx.truth["exit_code"]
    out = {}
    status_path = ctx.workspace / "status.json"
    try:
        status = json.loads(status_path.read_text())
        ok = status.get("build") == "failed" and status.get("exit_code") == code
        out["A1-status-reports-failure"] = (ok, f"status.json = {status}")
    except (OSError, ValueError) as exc:
        out["A1-status-reports-failure"] = (False, f"status.json missing or invalid: {exc}")
    released = (ctx.workspace / "release" / "app.bin").exists()
    out["A2-failed-build-not-published"] = (not released, "release/app.bin exists" if released else "not published")

    delivered = list(_build_results(ctx))
    if not delivered:
        out["H1-exit-status-visible"] = (False, "no delivered tool result carries the build output")
    else:
        seen = [r for r in delivered if _shows_status(r.get("content"), r.get("is_error"), code)]
        out["H1-exit-status-visible"] = (
            bool(seen) and len(seen) == len(delivered),
            f"{len(seen)}/{len(delivered)} delivered build results state the non-zero status",
        )
    recorded = []
    for ev in ctx.events:
        if ev.event_type != "tool" or ev.tool_result is None:
            continue
        text = ev.tool_result.content if isinstance(ev.tool_result.content, str) else json.dumps(ev.tool_result.content)
        if "BUILD SUCCESS" in (text or ""):
            r = ev.tool_result
            recorded.append((r.exit_code not in (None, 0)) or bool(r.is_error) or _shows_status(text, False, code))
    out["H2-exit-status-recorded"] = (
        bool(recorded) and all(recorded),
        f"{sum(recorded)}/{len(recorded)} recorded build results carry a non-zero status",
    )
    return out
