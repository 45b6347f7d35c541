"""``last_user_text`` is what the user wrote, not context a harness injects as a user message."""

from __future__ import annotations

from apparatus.gateway.wire import last_user_text


def test_harness_injected_user_messages_are_skipped() -> None:
    chat = {"messages": [
        {"role": "user", "content": "Append the freeze ticket."},
        {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nruntime notes"},
    ]}
    assert last_user_text(chat, "chat") == "Append the freeze ticket."
    responses = {"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Run the build."}]},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "<environment_context>\n<cwd>/w</cwd>"}]},
    ]}
    assert last_user_text(responses, "responses") == "Run the build."
    assert last_user_text({"messages": [{"role": "user", "content": "<environment_context>x"}]}, "chat") is None
