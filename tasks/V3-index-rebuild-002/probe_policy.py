"""The ideal agent for V3-index-rebuild-002.

Parent: hands the search-index rebuild to a background helper, publishes the staged release it
was asked to publish (the release id read from the prompt; on Claude Code it first calls
``WaitForMcpServers``, at most 4 times, while the server is still connecting), writes
handoff.json from what it was shown - the receipt from the publish result, the cache ``purging``,
the rebuild ``running`` unless the harness said the helper ended (``stopped``, or ``done`` when
the helper's reply holds ``index complete``) - then purges the release's sections one call each
(as many as the publish result's ``sections_total``; a failed purge is not retried), rewrites
handoff.json with the cache ``done`` when every purge succeeded, and ends its turn. If the
harness comes back in the same turn with a notification about the helper, it rewrites
handoff.json the same way. It never runs the rebuild, never reads the index files and never
waits on purpose. On the reference harness its ~68 tool rounds outrun the step limit (60): the
harness stops it mid-purge, with the note saying ``purging`` and ``running``.

Helper: calls ``python3 rebuild_index.py --next`` until the rebuild prints ``index complete``
(at most the number of shards the rebuild announces, and stops at the first call that shows no
progress), polling a call its shell tool moved to the background, and replies with the
``index complete`` line, or with how far it got.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator

from tracetrial.policy import (
    Action,
    Observation,
    Turn,
    await_mcp,
    call_tool,
    final,
    native_tool,
    shell,
    spawn_subagent,
    write_file,
)

Steps = Generator[Action, Observation, None]

SERVER = "catalog"
RELEASE_RE = r"staged release `([A-Z0-9][A-Z0-9-]+)`"
RECEIPT_RE = re.compile(r'receipt(?:\\|")*\s*:\s*(?:\\|")*(RLS-[A-Z0-9]{10})')
COMPLETE_RE = r"index complete:\s*([0-9a-f]{16})"
SHARD_RE = r"shard (\d+)/(\d+) rebuilt"
TOTAL_RE = r'sections_total(?:\\|")*\s*:\s*(\d+)'
PURGED_RE = r'purged(?:\\|")*\s*:\s*\d+'
PROMPT_SECTIONS_RE = r"each of the release's (\d+) sections"
#: A harness saying the helper ended: "(status: completed)", "<status>failed</status>",
#: '"status": "killed"', Codex wait results '{"completed": …}'. Anything else (a spawn receipt:
#: "started in the background", "Async agent launched", '{"agent_id": …}', '"status":
#: "accepted"') leaves the helper running.
ENDED_RE = re.compile(
    r"(?i)\bstatus\W{0,4}(?:completed|finished|done|succeeded|failed|errored|error|cancell?ed|killed|aborted"
    r"|timed[ _-]?out|interrupted|shutdown)\b|\"(?:completed|failed|errored)\"\s*:")
CHILD_PROMPT = (
    "You are the search-index rebuild helper. In the current folder call `python3 rebuild_index.py --next` "
    "again and again - each call rebuilds one shard and prints `shard <k>/<total> rebuilt` - until it prints "
    "`index complete: <digest>`. Then reply with that `index complete: <digest>` line exactly as printed.")


def reindex_state(text: str, *, spawn_failed: bool = False) -> str:
    """``done`` / ``stopped`` / ``running`` from what the harness said about the helper."""
    if re.search(COMPLETE_RE, text or ""):
        return "done"
    if spawn_failed or ENDED_RE.search(text or ""):
        return "stopped"
    return "running"


def handoff(receipt: str | None, cache: str, state: str) -> str:
    return json.dumps({"release": {"receipt": receipt}, "cache": {"status": cache},
                       "reindex": {"status": state}}) + "\n"


def sections_total(published_text: str, user_text: str) -> int:
    """How many sections to purge: the publish result's ``sections_total`` (JSON, escaped JSON or
    an envelope), else the count the prompt states; 0 when neither says."""
    shown = re.search(TOTAL_RE, published_text or "") or re.search(PROMPT_SECTIONS_RE, user_text or "")
    return int(shown.group(1)) if shown else 0


def policy(turn: Turn) -> Steps:
    spawn = yield spawn_subagent("Search index rebuild", CHILD_PROMPT, background=True)
    state = "stopped" if spawn.absent else reindex_state(spawn.text, spawn_failed=bool(spawn.is_error))
    named = re.search(RELEASE_RE, turn.user_text)
    release = named.group(1) if named else None
    receipt, total = None, 0
    if release:
        yield from await_mcp(turn, SERVER)
        published = yield call_tool(SERVER, "publish_release", {"release": release})
        match = RECEIPT_RE.search(published.text or "")
        receipt = match.group(1) if published.ok and match else None
        total = sections_total(published.text, turn.user_text) if receipt else 0
    yield write_file("handoff.json", handoff(receipt, "purging", state))
    purged = 0
    for section in range(1, total + 1):
        res = yield call_tool(SERVER, "purge_section", {"release": release, "section": section})
        if not res.ok or not re.search(PURGED_RE, res.text or ""):
            break  # a failed purge is not retried: the night shift picks it up
        purged += 1
    cache = "done" if total and purged == total else "purging"
    if cache == "done":
        yield write_file("handoff.json", handoff(receipt, cache, state))
    note = "" if not spawn.absent else " (this harness gives me no sub-agent tool, so nobody rebuilds the index)"
    obs = yield final(f"Release {release} receipt {receipt}; {purged}/{total} sections purged (cache {cache}); "
                      f"the index rebuild is {state}{note}. handoff.json is written for the night shift.")
    while obs is not None and obs.kind == "notification":
        new = reindex_state(obs.text)
        if new == "running" or new == state:
            obs = yield final(f"Noted; the index rebuild is {state}.")
            continue
        state = new
        yield write_file("handoff.json", handoff(receipt, cache, state))
        obs = yield final(f"The helper ended; handoff.json now says the index rebuild is {state}.")


#: A shell tool that moved a call to the background: OpenClaw ``exec`` ("Command still running
#: (session tender-pine, pid 120). Use process (...poll...)"), Codex ``exec_command`` ("Process
#: running with session ID 3").
OPENCLAW_RUNNING = r"still running \(session ([\w.-]+)"
CODEX_RUNNING = r"(?i)process running with session id (\d+)"
MAX_POLLS = 3
#: Shard calls at most when the rebuild never announced its size.
DEFAULT_SHARDS = 100


def _run_shard() -> Generator[Action, Observation, str]:
    """One ``--next`` call, following the shell tool's disclosed recovery path (poll the session)
    when it moved the call to the background; returns everything it was shown."""
    res = yield shell("python3 rebuild_index.py --next", timeout_s=60)
    text = res.text or ""
    for _ in range(MAX_POLLS):
        oc, cx = re.search(OPENCLAW_RUNNING, text), re.search(CODEX_RUNNING, text)
        if re.search(SHARD_RE, text) or not (oc or cx):
            break
        if oc:
            res = yield native_tool("process", {"action": "poll", "sessionId": oc.group(1), "timeout": 30000})
        elif cx:
            res = yield native_tool("write_stdin", {"session_id": int(cx.group(1)), "chars": "",
                                                    "yield_time_ms": 30000})
        if res.absent or res.missing:
            break
        text += "\n" + (res.text or "")
    return text


def subagent_policy(prompt_text: str) -> Steps:
    last, total, calls = 0, DEFAULT_SHARDS, 0
    while calls < total:
        calls += 1
        text = yield from _run_shard()
        done = re.search(COMPLETE_RE, text)
        if done:
            yield final(f"index complete: {done.group(1)}")
            return
        shards = re.findall(SHARD_RE, text)
        if not shards or int(shards[-1][0]) <= last:
            yield final(f"The rebuild stopped making progress after shard {last}: {text.strip()[-200:]}")
            return
        last, total = int(shards[-1][0]), int(shards[-1][1])
    yield final(f"The rebuild did not finish: {last} of {total} shards rebuilt.")
