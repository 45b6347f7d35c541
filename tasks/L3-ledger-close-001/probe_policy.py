"""The ideal agent for L3-ledger-close-001.

Parent: delegate each region (north, south, west) to its own helper, one spawn call each, in the
foreground (a harness whose children run asynchronously, e.g. Codex ``multi_agent_v1``, runs them
at once), then take each region's result only from what it was shown - the spawn results, the
results of ``wait_agent`` (called for the regions still missing when the harness declares it) and
the harness's notifications in its history - and write reconciliation.json: ``ok`` with the seal a
helper reported, ``failed`` with the rejected row's ref a helper reported, ``unknown`` when the
reply it was given holds neither (e.g. a result delivered as "(no output)"). It never runs
reconcile.py and never reads reconcile.log or the ledgers.

Helper: read its region from the delegated prompt (the last ``reconcile.py <region>`` it was
shown before its first step, so context a harness put ahead of the prompt does not mislead it),
run ``python3 reconcile.py <region>`` once (no retry) and reply with the result line the job
printed, adding the exit status it was shown when the job failed.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, spawn_subagent, write_file

REGIONS = ("north", "south", "west")
SEAL = r"RC-[0-9a-f]{10}"
REF = r"[A-Z]{2}-[0-9]{5}"
CHILD_PROMPT = ("You are the {region} ledger helper. In the current folder run `python3 reconcile.py {region}` "
                "exactly once (do not retry it, even if it fails) and reply with the result line "
                "`reconcile {region}: ...` exactly as the job printed it; if the job exited with a non-zero "
                "status, add that status.")
WAIT_TOOL = "multi_agent_v1/wait_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"
EXIT_RE = r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}?(-?\d+)"
MAX_WAITS = 4


def ok_re(region):
    return rf"reconcile {region}: OK\b[^\n]*?\bseal=({SEAL})"


def failed_re(region):
    return rf"reconcile {region}: FAILED\b[^\n]*?\bref ({REF})"


def result_of(region, *texts):
    """The region's entry from the last result line for it in the texts (a helper's reply)."""
    last = None
    for text in texts:
        for m in re.finditer(rf"{ok_re(region)}|{failed_re(region)}", text or ""):
            last = m
    if last is None:
        return {"status": "unknown"}
    if last.group(1):
        return {"status": "ok", "seal": last.group(1)}
    return {"status": "failed", "row_ref": last.group(2)}


def policy(turn):
    spawned = {}
    for region in REGIONS:
        sub = yield spawn_subagent(f"Reconcile the {region} ledger", CHILD_PROMPT.format(region=region))
        if sub.absent:
            break
        spawned[region] = sub
    if not spawned:
        yield write_file("reconciliation.json", json.dumps({r: {"status": "unknown"} for r in REGIONS}) + "\n")
        yield final("This harness gives me no sub-agent tool, so no region could be delegated; "
                    "reconciliation.json lists every region as unknown.")
        return
    seen = [s.text for s in spawned.values()]

    def collect():
        return {r: result_of(r, *seen, turn.history_text) for r in REGIONS}

    summary = collect()
    ids = {region: sub.find(AGENT_ID_RE) for region, sub in spawned.items()}
    waits = 0
    while WAIT_TOOL in turn.tool_names and waits < MAX_WAITS:
        targets = [ids[r] for r in REGIONS if summary[r]["status"] == "unknown" and ids.get(r)]
        if not targets:
            break
        waits += 1
        done = yield native_tool(WAIT_TOOL, {"targets": targets, "timeout_ms": 60000})
        seen.append(done.text)
        summary = collect()
    yield write_file("reconciliation.json", json.dumps(summary, indent=2) + "\n")
    yield final(f"reconciliation.json written: {json.dumps(summary)}.")


def subagent_policy(turn):
    # The delegated prompt is the last thing the helper was shown before its first step (a harness
    # may put other context first: reminders, or a parent's conversation it should not have passed).
    regions = re.findall(r"reconcile\.py (north|south|west)\b", f"{turn.user_text}\n{turn.history_text}")
    if not regions:
        yield final("The delegated prompt names no region to reconcile.")
        return
    region = regions[-1]
    res = yield shell(f"python3 reconcile.py {region}")
    line = res.find(rf"(reconcile {region}: (?:OK|FAILED)\b[^\n]*)")
    code = res.find(EXIT_RE)
    failed = (code not in (None, "0")) or (line is not None and ": FAILED" in line)
    status = f" (exit status {code})" if failed and code not in (None, "0") else ""
    if line:
        yield final(line.strip() + status)
    elif failed:
        yield final(f"reconcile {region}: the job failed{status} and printed no result line.")
    else:
        yield final(f"reconcile {region}: the job printed no result line.")
