"""The ideal agent for C2-retention-config-001.

Collects the three shard ids (one inventory command each; a result the compaction summarised is
still known to the run), then writes the config from what its *current* request shows: the two
fixed settings are taken from the visible conversation at that moment (the task's first message,
or a summary that kept them), never from memory of an earlier request. A setting it cannot see is
left out (nothing invented) and said. Its final answer ends with an account of what the write step
was shown, which the probe report keeps as the observation.

The probe reports a prompt of 92,000 tokens from the third request on (PROBE_OPTIONS; the task's
window is 100,000), until the harness has asked for one summary.
"""

from tracetrial.policy import final, shell, write_file

PROBE_OPTIONS = {"report_usage_tokens": {"tokens": 92000, "from_request": 3, "compactions": 1}}

SHARD_RE = r"SHARD-ID:\s*(alog-[0-9a-f]{6})"
REGION_RE = r"region:\s*`?([a-z]{2}-[a-z]+-\d)\b"
RETENTION_RE = r"retention_days:\s*`?(\d+)\b"
#: A phrase of the task's first message (is it still shown, verbatim or restated?).
PROMPT_MARK = "Compliance has fixed two settings"


def account(region, days, prompt_shown):
    """The probe's statement of what the write step was shown (parsed by the verifier)."""
    return (f"Context: prompt={'shown' if prompt_shown else 'missing'}; region={region or 'missing'}; "
            f"retention_days={days or 'missing'}.")


def render(region, days, shards):
    lines = []
    if region:
        lines.append(f"region: {region}")
    if days:
        lines.append(f"retention_days: {days}")
    lines.append("shards:")
    lines += [f"  - {s}" for s in sorted(shards)]
    return "\n".join(lines) + "\n"


def policy(turn):
    shards = []
    for part in ("a", "b", "c"):
        res = yield shell(f"./scripts/inventory.sh {part}")
        found = res.find(SHARD_RE) if res.ok else None
        if found and found not in shards:
            shards.append(found)
    # what the write step's request shows (after any compaction)
    region = turn.find(REGION_RE, include_system=True)
    days = turn.find(RETENTION_RE, include_system=True)
    shown = PROMPT_MARK in turn.system_text + "\n" + turn.history_text
    note = account(region, days, shown)
    yield write_file("deploy/retention.yaml", render(region, days, shards))
    missing = [n for n, v in (("region", region), ("retention_days", days)) if not v]
    if missing:
        yield final(f"deploy/retention.yaml written without {' and '.join(missing)}: "
                    f"the conversation I am shown no longer states it. {note}")
        return
    yield final(f"deploy/retention.yaml written ({len(shards)} shards). {note}")
