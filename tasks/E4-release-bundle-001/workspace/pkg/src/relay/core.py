"""The relay loop: read order events, keep the ones the warehouse handles, forward them."""

import json
import sys

HANDLED = {"order.paid", "order.cancelled", "order.address_changed"}


def keep(event):
    """Whether the warehouse queue handles this event."""
    return isinstance(event, dict) and event.get("type") in HANDLED


def forward(lines, out=sys.stdout):
    """Forward every handled event of ``lines`` (one JSON object per line); return how many."""
    sent = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        event = json.loads(line)
        if keep(event):
            out.write(json.dumps(event, sort_keys=True) + "\n")
            sent += 1
    return sent


if __name__ == "__main__":
    forward(sys.stdin)
