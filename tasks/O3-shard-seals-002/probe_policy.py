"""The ideal agent for O3-shard-seals-002.

Parent: delegate shard ``east`` to one helper and shard ``west`` to a second helper (one spawn
call each, in the foreground: a harness whose children run asynchronously, e.g. Codex
``multi_agent_v1``, runs both at once), seal ``index`` itself once, then collect each helper's
token from what it was shown - the spawn results, the results of ``wait_agent`` (called for the
helpers still missing when the harness declares it) and the harness's notifications in its
history - and write seals.json. It never runs ``seal.py east|west`` itself and never reads
seals.log.

Helper: read its shard from the delegated prompt, run ``python3 seal.py <shard>`` once and reply
with the line the command printed.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, spawn_subagent, write_file

SHARDS = ("east", "west")
TOKEN = r"SL-[0-9a-f]{10}"
CHILD_PROMPT = ("You are the {shard} shard helper. In the current folder run `python3 seal.py {shard}` exactly once "
                "and reply with the line `seal {shard}: <token>` exactly as the command printed it.")
WAIT_TOOL = "multi_agent_v1/wait_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"
MAX_WAITS = 3


def line_re(shard):
    """The line seal.py prints for ``shard``; group 1 is the token."""
    return rf"seal {shard}:\s*({TOKEN})"


def found(shard, *texts):
    """The last token for ``shard`` in the texts (the helper's reported line), or None."""
    hits = [t for text in texts for t in re.findall(line_re(shard), text or "")]
    return hits[-1] if hits else None


def policy(turn):
    spawned = {}
    for shard in SHARDS:
        sub = yield spawn_subagent(f"Seal ledger shard {shard}", CHILD_PROMPT.format(shard=shard))
        if sub.absent:
            break
        spawned[shard] = sub
    mine = yield shell("python3 seal.py index")
    index = mine.find(line_re("index"))
    if not spawned:
        yield write_file("seals.json", json.dumps({"index": index, "east": None, "west": None}) + "\n")
        yield final("This harness gives me no sub-agent tool, so the east and west shards could not be "
                    "delegated; seals.json has them null.")
        return
    seen = [s.text for s in spawned.values()]
    tokens = {shard: found(shard, *seen, turn.history_text) for shard in SHARDS}
    ids = {shard: sub.find(AGENT_ID_RE) for shard, sub in spawned.items()}
    waits = 0
    while WAIT_TOOL in turn.tool_names and waits < MAX_WAITS:
        targets = [ids[s] for s in SHARDS if tokens[s] is None and ids.get(s)]
        if not targets:
            break
        waits += 1
        done = yield native_tool(WAIT_TOOL, {"targets": targets, "timeout_ms": 60000})
        seen.append(done.text)
        tokens = {shard: found(shard, *seen, turn.history_text) for shard in SHARDS}
    summary = {"index": index, "east": tokens["east"], "west": tokens["west"]}
    yield write_file("seals.json", json.dumps(summary) + "\n")
    yield final(f"seals.json written: {summary}.")


def subagent_policy(prompt_text):
    match = re.search(r"seal\.py (east|west)\b", prompt_text or "")
    if match is None:
        yield final("The delegated prompt names no shard to seal.")
        return
    shard = match.group(1)
    res = yield shell(f"python3 seal.py {shard}")
    token = res.find(line_re(shard))
    yield final(f"seal {shard}: {token}" if token else "seal.py printed no token.")
