"""Re-capture the real request bodies under ``tests/gateway/fixtures/`` from the pinned CLIs.

    python tests/gateway/capture_cli_bodies.py [claude|codex ...]

Each CLI runs one prompt against a scripted local model that first asks for a shell
command that fails (``echo hi; exit 3``) and then answers with text, so the second
captured body carries a tool result. The bodies are stored exactly as received; no key
is in them (the CLIs get the dummy key ``x``). ``claude_bigint.json`` is derived from
``claude_1.json`` by adding an integer beyond 64 bits to ``metadata``, which a JSON
round trip through LiteLLM would rewrite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from apparatus.gateway.fake_upstream import FakeUpstream, shell_failure_script

FIXTURES = Path(__file__).parent / "fixtures"
BIN = Path(__file__).resolve().parents[2] / ".tt-tools" / "node_modules" / ".bin"
COMMAND = "echo hi; exit 3"
#: Inserted after ``"metadata":{`` to make the >64-bit variant.
BIG_INT = b'"tt_big_int":123456789012345678901234567890,'


def _codex_config(url: str, model: str) -> str:
    return f'''model = "{model}"
model_provider = "tt"
check_for_update_on_startup = false

[model_providers.tt]
name = "tt"
base_url = "{url}"
env_key = "TT_KEY"
wire_api = "responses"
request_max_retries = 1
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false
'''


def cli_available(which: str) -> bool:
    return (BIN / which).exists()


def run_cli(which: str, base_url: str, api_key: str, home: Path, prompt: str = "hi",
            model: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[bytes]:
    """One headless run of ``claude`` or ``codex`` against ``base_url`` (the Anthropic
    base, or the OpenAI base ending in ``/v1``), as HARNESSES.md describes."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    if which == "claude":
        env.update({"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": api_key,
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "IS_SANDBOX": "1",
                    "CLAUDE_CODE_MAX_RETRIES": "1", "CLAUDE_CODE_TMPDIR": str(home)})
        cmd = [str(BIN / "claude"), "-p", prompt, "--output-format", "stream-json", "--verbose",
               "--dangerously-skip-permissions", *(["--model", model] if model else [])]
    else:
        codex_home = home / "codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(_codex_config(base_url, model or "probe"))
        env.update({"CODEX_HOME": str(codex_home), "TT_KEY": api_key})
        cmd = [str(BIN / "codex"), "exec", "--json", "--skip-git-repo-check",
               "--dangerously-bypass-approvals-and-sandbox", prompt]
    return subprocess.run(cmd, env=env, cwd=home, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout, check=False)


def capture(which: str) -> list[Path]:
    with FakeUpstream(script=shell_failure_script(COMMAND)) as up, tempfile.TemporaryDirectory() as home:
        proc = run_cli(which, up.url if which == "claude" else up.url + "/v1", "x", Path(home))
        if proc.returncode != 0:
            raise SystemExit(f"{which} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
        posts = [c for c in up.captured if c.method == "POST"]
    FIXTURES.mkdir(exist_ok=True)
    out: list[Path] = []
    for i, cap in enumerate(posts):
        path = FIXTURES / f"{which}_{i}.json"
        path.write_bytes(cap.body)
        out.append(path)
    if which == "claude" and len(posts) > 1:
        body = posts[1].body
        at = body.rfind(b',"metadata":{"user_id"')     # the top-level one (tools may nest others)
        assert at > 0, "Claude Code body has no top-level metadata object"
        at += len(b',"metadata":{')
        path = FIXTURES / "claude_bigint.json"
        path.write_bytes(body[:at] + BIG_INT + body[at:])
        out.append(path)
    return out


if __name__ == "__main__":
    for name in sys.argv[1:] or ["claude", "codex"]:
        for p in capture(name):
            print(p, p.stat().st_size)
