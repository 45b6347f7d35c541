"""DeepSeek Harness 0.2.x: the ``sdk`` profile runtime (``deepseek@0.2.1rc2``).

0.2.x no longer ships a bundled ``cordis.yml`` for ``DSH_CORDIS_CONFIG``. Its runtime package
(``deepseek_harness_runtime``) offers ``resolve_bundled_launch_args()`` and the SDK
(``deepseek_harness/client.py``, ``HarnessClient._default_launch_args``) launches::

    <runtime> --profile sdk [--patch <overlay.yml> ...]          (DSH_HOME required)

The ``sdk`` profile is composed from the shipped bundles ``@deepseek-ai/dsh-base`` +
``@deepseek-ai/dsh-sdk-app`` (``dsh --profile sdk --dump-config``); its JSON-RPC server plugin
(``@deepseek-ai/dsh-sdk-jsonrpc-server``) answers the same methods rc6 did — ``initialize
{cwd, provider, model, reasoningEffort?, maxTokens?}``, ``session/prompt {sessionId,
contentBlocks}`` -> ``{messageId}``, ``shutdown`` — plus ``session/resume``, ``session/wait``
and ``session/working-directory/{get,set}``, and notifies ``session.event``, ``session.status``
and ``subagent.started`` / ``subagent.finished``. So a run is driven exactly as rc6's
(:mod:`harnesses.deepseek.rpc`); what differs is the launch, the environment and the records:

* provider route: ``@deepseek-ai/dsh-llm-deepseek-api-key`` speaks Anthropic Messages
  (default ``https://api.deepseek.com/anthropic``; ``$DEEPSEEK_BASE_URL``, then
  ``/v1/messages``), so the gateway hands out its ``anthropic`` base; key ``$DEEPSEEK_API_KEY``;
* ``DSH_HOME`` holds the profile (created from the shipped template on first launch) and the
  sessions: ``$DSH_HOME/sessions/<cwd slug>/<session>/session.v4.jsonl.zstd``;
* permissions: the profile's ``sandbox-policy`` reads ``$DSH_PERMISSION_MODE`` (default
  ``workspace-write`` with approval ``ask``; with no answerer an approval "fails closed");
  ``danger-full-access`` is its own no-sandbox, never-ask preset — the benchmark's ``bypass``
  mode, as rc6's bash ran unconfined. A ``native`` task keeps the harness default;
* telemetry: ``session-telemetry-otel`` reads ``$DSH_TELEMETRY_MODE`` (``FEEDBACK_ONLY`` |
  ``DISABLED``); the benchmark sets ``DISABLED`` (no collector is reachable, none is wanted);
* MCP: the runtime bundles ``@deepseek-ai/dsh-mcp-client`` ("connects to MCP servers and
  registers their tools on ctx.tools", one plugin instance per server, tool names
  ``mcp__<server>__<tool>``) but the ``sdk`` profile mounts none; a ``--patch`` overlay — the
  profile's native extension point — inserts one instance per task server
  (:func:`patch_overlay`);
* ask-user: the profile mounts the ``ctx.userQuestions`` seam (``user-questions``) but not the
  model-facing tool; the overlay inserts ``@deepseek-ai/dsh-tool-ask-user`` and the benchmark's
  answerer (:data:`ANSWERER_FILE`: 0.2.x asks a waterfall of ``user-questions/request``
  listeners instead of rc6's one registered provider; same ``userQuestions/ask`` wire to the
  client, :mod:`harnesses.deepseek.ask_user`) beside it;
* sub-agents: the profile declares ``subagent`` / ``subagent_fork`` (in-process children, their
  own sessions, reported by ``subagent.started`` / ``subagent.finished``). The probe model does
  not yet tell a DeepSeek child's request from its parent's nor map a spawn onto ``subagent``,
  so the adapter reports this as an apparatus gap (:data:`SUBAGENT_GAP`), not as absent.

Which surface an install offers is read once per install and process from the runtime itself
(:func:`probe_sdk_profile`: ``<runtime> --profile sdk --help`` in a throwaway ``DSH_HOME``),
never from the version string.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harnesses.base import McpServer

#: The benchmark's user-questions answerer for 0.2.x (rc6's provider API is gone there).
ANSWERER_FILE = Path(__file__).with_name("tt-ask-answerer.mjs")

PROFILE = "sdk"
#: What ``<runtime> --profile sdk --help`` says of a runtime that serves SDK clients.
SDK_HELP_MARK = "Serve DeepSeek Harness SDK clients over stdio JSON-RPC"
#: The runtime's own full-access preset (``permission-presets``: sandbox danger-full-access,
#: approval never): the benchmark's ``bypass`` permission mode.
BYPASS_PERMISSION_MODE = "danger-full-access"
#: The runtime's sub-agents, which the apparatus cannot drive yet (adapter capability gap).
SUBAGENT_GAP = ("DeepSeek Harness 0.2.x declares subagent/subagent_fork (in-process children with sessions of "
                "their own), but the probe model cannot yet tell a DeepSeek child's request from its parent's "
                "or map a spawn onto the subagent tool")


def probe_sdk_profile(runtime: Path, timeout_s: float = 120.0) -> bool:
    """Whether ``runtime`` serves SDK clients through ``--profile sdk`` (its help says so).
    Run in a throwaway ``DSH_HOME``/``HOME`` (the profile folder it creates is discarded)."""
    with tempfile.TemporaryDirectory(prefix="tt-dsh-probe-") as tmp:
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "DSH_HOME": str(Path(tmp) / "dsh"),
               "DSH_TELEMETRY_MODE": "DISABLED"}
        try:
            out = subprocess.run([str(runtime), "--profile", PROFILE, "--help"], capture_output=True, text=True,
                                 timeout=timeout_s, env=env, cwd=tmp, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
    return out.returncode == 0 and SDK_HELP_MARK in out.stdout


def launch_argv(runtime: Path, patches: Sequence[Path] = ()) -> list[str]:
    """The SDK's launch (``HarnessClient._default_launch_args``): runtime, profile, overlays."""
    return [str(runtime), "--profile", PROFILE, *(a for p in patches for a in ("--patch", str(p)))]


def _yaml(value: object) -> str:
    """A YAML scalar/flow value (JSON is YAML; keeps strings with any character safe)."""
    return json.dumps(value, ensure_ascii=False)


def patch_overlay(mcp: Sequence[McpServer], ask_user: bool) -> str | None:
    """The ``--patch`` overlay of a task (``None`` when it needs none): one root ``insert`` of
    the entries the ``sdk`` profile lacks — an ``mcp-client`` instance per MCP server (stdio;
    ``failOnStartupError`` so a server that cannot start fails the launch instead of silently
    declaring no tools) and, for ``ask_user``, the model-facing ask tool plus the benchmark's
    answerer (``./tt-ask-answerer.mjs``, anchored beside the overlay file)."""
    entries: list[str] = []
    for s in mcp:
        entries.append(
            f"  - id: {_yaml('tt-mcp-' + s.name)}\n"
            "    name: '@deepseek-ai/dsh-mcp-client'\n"
            "    config:\n"
            "      transport: stdio\n"
            f"      serverName: {_yaml(s.name)}\n"
            f"      command: {_yaml(s.command)}\n"
            f"      args: {_yaml(list(s.args))}\n"
            f"      env: {_yaml(dict(s.env))}\n"
            "      failOnStartupError: true\n"
        )
    if ask_user:
        entries.append("  - id: tool-ask-user\n    name: '@deepseek-ai/dsh-tool-ask-user'\n")
        entries.append(f"  - id: tt-ask-answerer\n    name: {_yaml('./' + ANSWERER_FILE.name)}\n")
    if not entries:
        return None
    return ("# TraceTrial: the task's MCP servers (the runtime's bundled mcp-client, one instance per server)\n"
            "# and, for ask_user tasks, the runtime's ask tool + the benchmark's user-questions answerer.\n"
            "- insert:\n" + "".join(entries))


def write_overlay(folder: Path, mcp: Sequence[McpServer], ask_user: bool) -> Path | None:
    """Write ``folder/tt-patch.yml`` (:func:`patch_overlay`) and, for ``ask_user``, the answerer
    beside it; ``None`` when the task needs no overlay."""
    text = patch_overlay(mcp, ask_user)
    if text is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    if ask_user:
        (folder / ANSWERER_FILE.name).write_bytes(ANSWERER_FILE.read_bytes())
    path = folder / "tt-patch.yml"
    path.write_text(text, encoding="utf-8")
    return path
