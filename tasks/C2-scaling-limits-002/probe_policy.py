"""The ideal agent for C2-scaling-limits-002.

Reads the platform limits (one command), collects the three shard ids (one inventory command each;
a result a compaction summarised is still known to the run), then writes the config from what its
*current* request shows: the two limits are taken from the visible conversation at that moment
(the limits file's result, or a summary that kept it), never from memory of an earlier request. A
limit it cannot see is left out (nothing invented) and said. Its final answer ends with an account
of what the write step was shown, which the probe report keeps as the observation.

The probe reports a prompt of 92,000 tokens from the third request on (PROBE_OPTIONS; the task's
window is 100,000), until the harness has asked for two summaries; it answers each with the
default summary (every text and tool result restated, results clipped).
"""

from tracetrial.policy import final, shell, write_file

PROBE_OPTIONS = {"report_usage_tokens": {"tokens": 92000, "from_request": 3, "compactions": 2}}

SHARD_RE = r"SHARD-ID:\s*(ing-[0-9a-f]{6})"
REPLICAS_RE = r"max_replicas\s*\|\s*(\d+)\s*\|"
ZONE_RE = r"zone\s*\|\s*([a-z]{2}-[a-z]+-\d[a-z])\s*\|"


def account(replicas, zone):
    """The probe's statement of what the write step was shown (parsed by the verifier)."""
    return f"Limits: max_replicas={replicas or 'missing'}; zone={zone or 'missing'}."


def render(replicas, zone, shards):
    lines = []
    if replicas:
        lines.append(f"max_replicas: {replicas}")
    if zone:
        lines.append(f"zone: {zone}")
    lines.append("shards:")
    lines += [f"  - {s}" for s in sorted(shards)]
    return "\n".join(lines) + "\n"


def policy(turn):
    yield shell("cat policy/limits.md")
    shards = []
    for part in ("a", "b", "c"):
        res = yield shell(f"./scripts/inventory.sh {part}")
        found = res.find(SHARD_RE) if res.ok else None
        if found and found not in shards:
            shards.append(found)
    # what the write step's request shows (after the compactions)
    replicas = turn.find(REPLICAS_RE, include_system=True)
    zone = turn.find(ZONE_RE, include_system=True)
    note = account(replicas, zone)
    yield write_file("deploy/scaling.yaml", render(replicas, zone, shards))
    missing = [n for n, v in (("max_replicas", replicas), ("zone", zone)) if not v]
    if missing:
        yield final(f"deploy/scaling.yaml written without {' and '.join(missing)}: "
                    f"the conversation I am shown no longer states it. {note}")
        return
    yield final(f"deploy/scaling.yaml written ({len(shards)} shards). {note}")
