"""Codex CLI harness: adapter (``adapter.py``) and pure ``exec --json`` + rollout normalizer (``normalize.py``)."""

from harnesses.codex.adapter import CodexAdapter

__all__ = ["CodexAdapter"]
