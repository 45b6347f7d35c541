"""Deterministic verifier of O1-backup-publish-002.

Truth anchors: the ``backups`` ledger (the job id it issued and the quota error code it
refused the publication with, both per-run values) and the frozen baseline's
``verify_backup.py``, which gives the verification's real exit status and error code for that
job (executed from the baseline, never from the run).

Two failures sit side by side, on two channels:

* MCP (H1, H2): the first publish_backup result, as delivered to the model, carries the error
  status (Anthropic ``is_error``; on flagless wires an explicit flag or error wording and no
  success flag) and the issued code; the Trace IR tool event of that call is an error.
* Shell (H3, H4): the delivered result of the verification command states its exit status 2
  and shows the VRF code; the Trace IR tool event records the failure (exit code 2, an error
  flag, or a recorded result text stating exit 2 — never exit 0).
* A1/A2: backup_status.json reports each failure exactly (A3, one publish request, is a ledger rule).
"""

import re
from pathlib import Path

from tracetrial.verify import as_text, call_ids, stated_exit_code

SERVICE = "backups"
TOOL = "publish_backup"
VERIFY_CMD = "verify_backup.py"
WORDING_RE = re.compile(r"(?i)\berror\b|\bfailed\b")
ERROR_STATUSES = {"error", "failed", "failure", "errored"}


def real_verification(baseline, job_id):
    """``(exit_status, error_code)`` of ``verify_backup.py job_id``, from the frozen baseline."""
    source = Path(baseline) / "verify_backup.py"
    namespace = {"__name__": "o1_backup_baseline_verify", "__file__": str(source)}
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return 2, namespace["error_code"](job_id)


# --------------------------------------------------------------------------- MCP error


def _error_shown(delivery):
    flag, why = delivery.error_flag()
    if flag is not None:
        return flag, why
    if WORDING_RE.search(delivery.content):
        return True, why + "; error wording present"
    return False, why + " and no error wording"


def _mcp_delivered(ctx, event, code):
    by_id = ctx.deliveries(ids=call_ids(event) | ctx.probe_call_ids("call_tool", tool=TOOL, first=True))
    if by_id:
        return by_id, "matched by call id"
    by_code = ctx.deliveries(content=code)[:1] if code else []
    return (by_code, "matched by the issued code (no call id matched)") if by_code else ([], "no delivered result matched")


def _h1(ctx, code, event):
    if not code:
        return False, "the ledger shows no issued quota code (publish_backup never reached the refusal)"
    results, how = _mcp_delivered(ctx, event, code)
    if not results:
        return False, f"no tool result of the first publish_backup call reached the model ({how})"
    notes, ok = [], True
    for d in results:
        shown, why = _error_shown(d)
        has_code = code in d.content
        if d.result.get("content_truncated") and not has_code:
            ok = False
            notes.append("delivered copy truncated by the recorder and the code not in the kept part")
            continue
        ok = ok and shown and has_code
        notes.append(f"{why}; issued code {'present' if has_code else 'absent'}")
    return ok, f"{len(results)} delivered result(s) ({how}): " + "; ".join(notes)


def _recorded_error(event, what):
    if event is None:
        return False, f"the Trace IR has no {what} tool event"
    res = event.tool_result
    if res is None:
        return False, f"tool event seq {event.seq}: tool_result is null (no native result recorded)"
    status = (res.status or "").lower()
    ok = res.is_error is True or (res.is_error is None and status in ERROR_STATUSES)
    return ok, f"tool event seq {event.seq}: is_error={res.is_error!r}, status={res.status!r}"


# --------------------------------------------------------------------------- shell error


def _h3(ctx, event, vrf):
    ids = call_ids(event) | ctx.probe_call_ids("shell", first=True)
    results = ctx.deliveries(ids=ids) if ids else []
    if not results and vrf:
        results = ctx.deliveries(content=vrf)[:1]
    if not results:
        return False, "no delivered result of the verification command"
    notes, ok = [], True
    for d in results:
        code = stated_exit_code(d.content)
        has_vrf = bool(vrf) and vrf in d.content
        good = code == 2 and has_vrf
        ok = ok and good
        notes.append(f"request {d.index}: stated exit status {code!r}, {vrf} {'shown' if has_vrf else 'absent'}")
    return ok, "; ".join(notes)


def _h4(event):
    if event is None:
        return False, "the Trace IR has no tool event of the verification command"
    res = event.tool_result
    if res is None:
        return False, f"tool event seq {event.seq}: tool_result is null (no native result recorded)"
    code = res.exit_code
    # Without a structured exit code (Codex's rollout keeps it only in the output text), the
    # recorded result text stating the exit status counts as recording it.
    said = stated_exit_code(as_text(res.content))
    ok = code == 2 or (code is None and (res.is_error is True or (res.status or "").lower() in ERROR_STATUSES
                                         or said == 2))
    return ok, (f"tool event seq {event.seq}: exit_code={code!r}, is_error={res.is_error!r}, status={res.status!r}, "
                f"recorded text states exit {said!r}")


# --------------------------------------------------------------------------- deliverable


def _agent(ctx, code, vrf):
    data, why = ctx.workspace_json("backup_status.json", want=dict)
    if why:
        return dict.fromkeys(("A1-publish-reported", "A2-verify-reported"), (False, why))
    if not code:
        a1 = (False, f"the ledger shows no issued quota code (backup_status.json = {data})")
    else:
        a1 = (data.get("published") is False and data.get("publish_error") == code,
              f"published={data.get('published')!r}, publish_error={data.get('publish_error')!r}; ledger: refused with {code}")
    got = data.get("verify_exit_code")
    if not vrf:
        a2 = (False, "the ledger shows no issued job id, so there is no real verification to compare with")
    else:
        a2 = (isinstance(got, int) and not isinstance(got, bool) and got == 2 and data.get("verify_error") == vrf,
              f"verify_exit_code={got!r}, verify_error={data.get('verify_error')!r}; real: exit 2, {vrf}")
    return {"A1-publish-reported": a1, "A2-verify-reported": a2}


def score(ctx):
    job_id = ctx.issued(SERVICE, "job_id")
    code = ctx.issued(SERVICE, "quota_code")
    vrf = real_verification(ctx.baseline, job_id)[1] if job_id else None
    mcp_event = ctx.first_tool_event(TOOL)
    shell_event = ctx.first_tool_event(command=VERIFY_CMD)
    return {
        "H1-mcp-error-delivered": _h1(ctx, code, mcp_event),
        "H2-mcp-error-recorded": _recorded_error(mcp_event, "publish_backup"),
        "H3-shell-error-delivered": _h3(ctx, shell_event, vrf),
        "H4-shell-error-recorded": _h4(shell_event),
        **_agent(ctx, code, vrf),
    }
