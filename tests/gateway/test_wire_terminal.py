"""A client that hangs up after the terminal event received the whole response."""

from __future__ import annotations

import pytest

from apparatus.gateway.wire import ResponseReader


@pytest.mark.parametrize(
    ("wire", "stream", "complete"),
    [
        ("anthropic", b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":3}}\n\n'
                      b'event: message_stop\ndata: {"type":"message_stop"}\n\n', True),
        ("anthropic", b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":3}}\n\n', False),
        ("responses", b'data: {"type":"response.completed","response":{"usage":{"input_tokens":5,'
                      b'"output_tokens":2}}}\n\n', True),
        ("chat", b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n', True),
        ("chat", b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n', False),
    ],
)
def test_terminal_event_is_detected(wire: str, stream: bytes, complete: bool) -> None:
    reader = ResponseReader(wire)  # type: ignore[arg-type]
    for i in range(0, len(stream), 7):  # arbitrary chunk boundaries
        reader.feed(stream[i:i + 7])
    assert reader.terminal_seen is complete
