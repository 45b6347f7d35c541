"""Recognising text a harness injects as a *user* message (environment context, internal
context blocks, continuation preambles) so that "the user's last message" means what the
user wrote. Shared by the probe model and the gateway's recorder.
"""

from __future__ import annotations

import re

HARNESS_INJECTED = re.compile(
    r"^\s*(\[SYSTEM NOTIFICATION|<task-notification>|<environment_context>|<user_instructions>|"
    r"# AGENTS\.md instructions|This session is being continued from a previous conversation|"
    r"Another language model started to solve this problem|<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>|"
    # DeepSeek Harness 0.2.x: a block after the prompt of a new session's first message
    r"Current runtime context\.)"
)


def is_harness_injected(text: str) -> bool:
    """True when a user-role text was written by the harness, not the user."""
    return bool(HARNESS_INJECTED.match(text))
