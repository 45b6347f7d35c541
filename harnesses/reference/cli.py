"""``python -m harnesses.reference``: run one user turn of the reference harness.

::

    python -m harnesses.reference --base-url http://127.0.0.1:4000/v1 --model probe \\
        --workspace <dir> --log <run>/native/reference-events.jsonl \\
        --session-dir <run>/native/sessions --new-session --session-id s-1 --turn 1 \\
        --prompt "Run the build" [--mcp-config servers.json] [--deny 'rm -rf *'] \\
        [--ask-user-command CMD | --ask-user-answers answers.json] [--secrets-file secrets.json] \\
        [--max-model-calls N] [--deadline-s S] [--mutant hide_exit_code]

    ... --resume s-1 --turn 2 --prompt "Now publish it"

A new session's system prompt ends with the project memory (``AGENTS.md`` of the workspace, read
at that moment; absent file, no memory); a resumed session keeps the prompt it started with.

The API key is read from ``$OPENAI_API_KEY`` (``--api-key-env``). stdout gets one
JSON line (``{"type": "result", "session_id", "status", "final_text", …}``);
diagnostics go to stderr. Exit status: 0 when the turn completed, 1 when it
stopped otherwise (provider error, budget, deadline, pending children), 2 on a
usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harnesses.reference import __version__
from harnesses.reference import tools as T
from harnesses.reference.agent import (
    MAIN,
    NOTIFICATION,
    UNFINISHED,
    Agent,
    AgentConfig,
    Principal,
    system_prompt,
)
from harnesses.reference.ask_user import AskUserChannel
from harnesses.reference.chat import ChatClient
from harnesses.reference.mcp_tools import McpBridge, load_config
from harnesses.reference.mutants import MUTANTS, UnknownMutantError, check_mutant
from harnesses.reference.records import NativeLog, SessionRecord, SessionStore, utc_stamp
from tracetrial.redact import CREDENTIAL_ENV_VARS, Redactor

#: Environment variable names treated as credentials (besides the kernel's known list).
CREDENTIAL_NAME = re.compile(r"(?i)(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)($|_)")
INTERRUPTED = "No result: the harness stopped before this call finished (it may or may not have run)."


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harnesses.reference",
                                description="TraceTrial reference harness: run one user turn.")
    p.add_argument("--version", action="version", version=f"tt-reference {__version__}")
    p.add_argument("--base-url", required=True, help="Chat Completions base URL (POST {base}/chat/completions)")
    p.add_argument("--model", required=True)
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="env var holding the API key")
    p.add_argument("--workspace", type=Path, default=Path.cwd())
    p.add_argument("--log", type=Path, required=True, help="native JSONL event log (appended)")
    p.add_argument("--session-dir", type=Path, required=True)
    s = p.add_mutually_exclusive_group(required=True)
    s.add_argument("--new-session", action="store_true", help="start a new session (no history)")
    s.add_argument("--resume", metavar="ID", help="continue session ID with its full history")
    p.add_argument("--session-id", help="id of the new session (default: generated)")
    p.add_argument("--replay-from", metavar="ID", help="new session seeded with session ID's history")
    p.add_argument("--turn", type=int, default=1, help="the user turn index (recorded in every event)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt")
    g.add_argument("--prompt-file", type=Path)
    p.add_argument("--deadline-s", type=float, default=600.0, help="no new model request after this")
    p.add_argument("--mcp-config", type=Path, help='{"servers": {name: {command, args, env}}}')
    p.add_argument("--mcp-timeout-s", type=float, default=120.0)
    p.add_argument("--deny", action="append", default=[], metavar="RULE",
                   help="deny rule '[tool:]glob' (shell commands by default); repeatable")
    p.add_argument("--ask-user-command", help="shell command answering a JSON question on stdin")
    p.add_argument("--ask-user-answers", type=Path, help="answers JSON file")
    p.add_argument("--secrets-file", type=Path, help="JSON list of values to mask (besides env credentials)")
    p.add_argument("--max-model-calls", type=int, help="model requests allowed in this invocation")
    p.add_argument("--max-steps", type=int, default=60, help="tool rounds per principal")
    p.add_argument("--background-jobs", action="store_true",
                   help="declare shell run_in_background and the job_status tool")
    p.add_argument("--protect", action="append", default=[], metavar="PATH",
                   help="workspace-relative path no command or file tool may change (repeatable)")
    p.add_argument("--no-network", action="store_true", help="run every command without network access")
    p.add_argument("--tty", action="store_true", help="declare the shell's tty option (a pseudo-terminal)")
    p.add_argument("--context-window", type=int, metavar="TOKENS",
                   help="the model's context window: compact the history when a response reports a prompt of "
                        "80%% of it or more (default: never compact)")
    p.add_argument("--mutant", help=f"seeded defect: {', '.join(sorted(MUTANTS))}")
    return p


def credentials(env: dict[str, str], own_key_var: str) -> dict[str, str]:
    """Credential-looking variables of ``env`` (values of 8+ characters), the harness's own key excluded."""
    return {k: v for k, v in env.items()
            if k != own_key_var and len(v) >= 8 and (k in CREDENTIAL_ENV_VARS or CREDENTIAL_NAME.search(k))}


def repair_dangling(messages: list[dict[str, Any]]) -> list[str]:
    """Give every tool call without a result an explicit 'no result' answer; returns their ids."""
    out: list[dict[str, Any]] = []
    missing: list[str] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        out.append(msg)
        i += 1
        if msg.get("role") != "assistant" or not msg.get("tool_calls"):
            continue
        answered = set()
        while i < len(messages) and messages[i].get("role") == "tool":
            answered.add(messages[i].get("tool_call_id"))
            out.append(messages[i])
            i += 1
        for call in msg["tool_calls"]:
            if call.get("id") not in answered:
                missing.append(call["id"])
                out.append({"role": "tool", "tool_call_id": call["id"], "content": INTERRUPTED})
    messages[:] = out
    return missing


def forget_turns(messages: list[dict[str, Any]]) -> None:
    """The ``lose_turn_fact`` defect: keep the system prompt and assistant text only."""
    kept = []
    for m in messages:
        if m.get("role") == "system":
            kept.append(m)
        elif m.get("role") == "assistant" and m.get("content"):
            kept.append({"role": "assistant", "content": m["content"]})
    messages[:] = kept


def before_last_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``stale_handoff`` defect: the history a new session is seeded with is the previous
    session as it stood before its last turn (that turn's prompt, tool results and answer are
    missing), as if a snapshot taken when the turn began were replayed instead of the saved session."""
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user" and not (
        isinstance(m.get("content"), str) and m["content"].startswith(NOTIFICATION))]
    return messages[:starts[-1]] if starts else messages


#: Project memory: the workspace file loaded into the system prompt when a session starts.
MEMORY_FILE = "AGENTS.md"
#: Bytes of the memory file loaded (the rest is left out with a notice).
MEMORY_LIMIT = 32 * 1024


def project_memory(workspace: Path, cache_dir: Path, mutant: str | None) -> tuple[str, dict[str, Any]] | None:
    """The project memory a new session starts with, and its native record's data (``None``: no file).

    Faithful: ``AGENTS.md`` is read afresh at every session start, so a note saved in an earlier
    session reaches the next one. The ``stale_memory`` defect reads it once per run and keeps a copy
    in the harness's home; later sessions get that copy, so notes saved since are missing."""
    path = workspace / MEMORY_FILE
    cache = cache_dir / (hashlib.sha256(str(workspace).encode()).hexdigest()[:16] + ".md")
    source = "file"
    if mutant == "stale_memory" and cache.is_file():
        data, source = cache.read_bytes(), "cache"
    else:
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if mutant == "stale_memory":
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_bytes(data)
    shown = data[:MEMORY_LIMIT].decode("utf-8", errors="replace")
    if len(data) > MEMORY_LIMIT:
        shown += f"\n[memory truncated: {len(data) - MEMORY_LIMIT} more bytes in {MEMORY_FILE}]"
    text = (f"\n\nProject memory ({MEMORY_FILE} in the workspace, loaded when this session started; edit "
            f"that file to keep notes for later sessions):\n{shown}")
    return text, {"path": MEMORY_FILE, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                  "source": source, "truncated": len(data) > MEMORY_LIMIT}


def skills_section(workspace: Path) -> str:
    """The system prompt's list of the workspace's skills (empty without any)."""
    skills = T.find_skills(workspace)
    if not skills:
        return ""
    lines = "\n".join(f"- {s.name}: {s.description or '(no description)'}" for s in skills)
    return f"\n\nSkills of this workspace (load one with the skill tool before following it):\n{lines}"


def _on_sigterm(signum: int, frame: Any) -> None:
    """The runner's wall clock: commands run in their own process groups, so end them first."""
    T.end_background_processes()
    os._exit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    ap = parser()
    args = ap.parse_args(argv)
    try:
        mutant = check_mutant(args.mutant)
    except UnknownMutantError as exc:
        ap.error(str(exc))
    env = dict(os.environ)
    api_key = env.get(args.api_key_env, "")
    creds = credentials(env, args.api_key_env)
    secrets: list[str] = []
    if args.secrets_file is not None:
        secrets = [str(s) for s in json.loads(args.secrets_file.read_text(encoding="utf-8"))]
    leak = mutant == "leak_secret"
    redactor = None if leak else Redactor({v for v in (*creds.values(), *secrets, api_key) if v and len(v) >= 4})
    workspace = args.workspace.resolve()
    store = SessionStore(args.session_dir)
    memory: tuple[str, dict[str, Any]] | None = None
    try:
        if args.resume:
            record = store.load(args.resume)
            action = "resume"
        else:
            now = utc_stamp()
            memory = project_memory(workspace, Path.home() / ".tt-reference" / "memory-cache", mutant)
            system = {"role": "system", "content": system_prompt(workspace, creds, leak) + (memory[0] if memory else "")
                      + skills_section(workspace)}
            record = SessionRecord(session_id=args.session_id or f"s-{uuid.uuid4().hex[:12]}", created_at=now,
                                   updated_at=now, harness_version=__version__, messages=[system])
            if args.replay_from:
                record.messages = store.load(args.replay_from).messages
                if mutant == "stale_handoff":
                    record.messages = before_last_turn(record.messages)
                # a new session starts with its own system prompt (memory as it is now); the
                # replayed history follows it
                if record.messages and record.messages[0].get("role") == "system":
                    record.messages[0] = system
            action = "new"
    except (FileNotFoundError, ValueError) as exc:
        print(f"tt-reference: {exc}", file=sys.stderr)
        return 2
    prompt = args.prompt if args.prompt is not None else args.prompt_file.read_text(encoding="utf-8")
    log = NativeLog(args.log, session_id=record.session_id, turn=args.turn, redactor=redactor)
    restored = len(record.messages) if args.resume or args.replay_from else 0
    dangling = repair_dangling(record.messages) if action == "resume" else []
    if action == "resume" and mutant == "lose_turn_fact":
        forget_turns(record.messages)
    log.write("session", {"action": action, "session_id": record.session_id,
                          "history_replayed": bool(args.resume or args.replay_from), "replayed_from": args.replay_from,
                          "messages_restored": restored, "mutant": mutant, "harness_version": __version__})
    if memory is not None:
        log.write("memory", memory[1])
    for call_id in dangling:
        log.write("tool_result", {"call_id": call_id, "name": None, "content": INTERRUPTED, "is_error": True,
                                  "status": "interrupted", "exit_code": None, "duration_s": None, "truncated": None,
                                  "omitted_bytes": None, "saved_paths": [], "structured_content": None})
    record.messages.append({"role": "user", "content": prompt})
    record.turns.append(args.turn)
    store.save(record, redactor)

    cfg = AgentConfig(
        workspace=workspace, model=args.model, deadline=time.monotonic() + args.deadline_s,
        shell_env={k: v for k, v in env.items() if k != args.api_key_env},
        deny=[T.DenyRule.parse(r) for r in args.deny], mutant=mutant, max_model_calls=args.max_model_calls,
        max_steps=args.max_steps, ask_user=AskUserChannel.from_args(args.ask_user_command, args.ask_user_answers),
        redactor=redactor, turn=args.turn, background_jobs=args.background_jobs,
        tty=args.tty, context_window=args.context_window,
        confine=T.Confinement(workspace, tuple(args.protect), args.no_network,
                              text_guard=mutant == "unguarded_cleanup",
                              keep_network=mutant == "ignore_network_policy")
        if args.protect or args.no_network else None)
    servers = load_config(args.mcp_config.read_text(encoding="utf-8")) if args.mcp_config else []
    result = asyncio.run(_run(cfg, log, record, store, api_key, args.base_url, servers, args.mcp_timeout_s))
    print(json.dumps({"type": "result", **result}, ensure_ascii=False))
    sys.stdout.flush()
    return 0 if result["status"] == "completed" else 1


def _saver(cfg: AgentConfig, store: SessionStore, record: SessionRecord) -> Callable[[], None]:
    """What the agent calls after each message of the turn: the session file is rewritten, so a turn
    killed mid-way resumes with what it did. ``resume_from_turn_start``: nothing is written until the
    turn ends (the file keeps the state of the turn's start)."""
    if cfg.mutant == "resume_from_turn_start":
        return lambda: None
    return lambda: store.save(record, cfg.redactor)


async def _run(cfg: AgentConfig, log: NativeLog, record: SessionRecord, store: SessionStore, api_key: str,
               base_url: str, servers: list[Any], mcp_timeout_s: float) -> dict[str, Any]:
    chat = ChatClient(base_url, api_key)
    mcp = McpBridge(servers, cwd=str(cfg.workspace), timeout_s=mcp_timeout_s, mutant=cfg.mutant) if servers else None
    agent = Agent(cfg, log, chat, mcp, session_id=record.session_id, next_child=record.next_child,
                  save=_saver(cfg, store, record))
    try:
        if mcp is not None:
            await mcp.start()
            for err in mcp.errors:
                log.write("error", {"kind": "harness_error", "message": err})
        status, final = await agent.loop(Principal(MAIN), record.messages)
        pending = await agent.abandon_pending()
        agent.end_jobs()  # how each background job ended, before the completion record
        if pending and status == "completed":
            status = "incomplete"
        if cfg.mutant == "hide_unfinished" and status in UNFINISHED:
            status, pending = "completed", []  # the defect: an unfinished turn is reported as completed
        if status != "completed":
            print(f"tt-reference: turn {cfg.turn} ended with status {status}: {final}", file=sys.stderr)
        data = agent.complete(status, final, pending)
    finally:
        for c in agent.children.values():
            if c.task is not None and not c.task.done():
                c.task.cancel()
        if mcp is not None:
            await mcp.aclose()
        await chat.aclose()
        agent.end_jobs()  # (no-op when done above) a crash must not leave a job unrecorded
        T.end_background_processes()
        record.next_child = agent.next_child
        store.save(record, cfg.redactor)
    return {"session_id": record.session_id, "status": data["status"], "final_text": data["final_text"],
            "model_calls": data["model_calls"], "tool_calls": data["tool_calls"], "usage": data["usage"],
            "pending_child_ids": data["pending_child_ids"]}
