"""DeepSeek Harness: adapter (``adapter.py``), its JSON-RPC runtime driver (``rpc.py``) and the pure
wire + session-archive normalizer (``normalize.py``)."""

from harnesses.deepseek.adapter import DeepSeekAdapter

__all__ = ["DeepSeekAdapter"]
