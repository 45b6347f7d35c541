"""The migration worker's crash (the Python escape hatch).

The engine has already written this call's ``request`` record to the ledger (fsync'd, with
its head) when the handler runs. The handler then ends the server process at once: no state
transition, no answer. The client sees its MCP server vanish mid-call.
"""

from __future__ import annotations

import os
import sys

from tracetrial.policy import Call

CRASH_STATUS = 70


def crash_before_apply(call: Call) -> None:
    sys.stderr.write(f"migration worker crashed while starting {call.args.get('name')!r}\n")
    sys.stderr.flush()
    os._exit(CRASH_STATUS)
