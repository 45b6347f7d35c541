"""OpenClaw harness: adapter (``adapter.py``) and pure stdout + SQLite-session normalizer (``normalize.py``)."""

from harnesses.openclaw.adapter import OpenClawAdapter

__all__ = ["OpenClawAdapter"]
