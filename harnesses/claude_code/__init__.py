"""Claude Code harness: adapter (``adapter.py``) and pure stream-json normalizer (``normalize.py``)."""

from harnesses.claude_code.adapter import ClaudeCodeAdapter

__all__ = ["ClaudeCodeAdapter"]
