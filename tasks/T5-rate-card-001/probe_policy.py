"""The ideal agent for T5-rate-card-001.

Loads the rate-card skill through the harness's own skill facility - the reference's ``skill``
tool, Claude Code's ``Skill`` tool, or (for a harness that lists its skills with their location and
has the model read SKILL.md) a file read of the listed location - then quotes from what the model
is shown after that load: the zone's row and the card's checksum line, taken from the visible
conversation, never from the pack. A row it cannot see is not invented: the quote says so. Its
final answer ends with an account of the card it was shown, which the probe report keeps.
"""

import json
import re

from tracetrial.policy import expand_skill_root, final, native_tool, read_file, write_file

SKILL = "rate-card"
ZONE, WEIGHT = "Z097", 38
ROW_RE = r"\|\s*Z097\s*\|\s*(\d+)\s*\|"
CHECKSUM_RE = r"CARD-CHECKSUM:\s*(RC-[A-Z0-9-]+)"
ROWS_RE = r"\|\s*Z\d{3}\s*\|\s*\d+\s*\|"
#: Where a harness that lists skills by location says the card lives.
LOCATION_RE = r"((?:/|\.?[\w.-]+/)[\w./-]*rate-card/SKILL\.md)"


def account(turn, rate, checksum):
    """The probe's statement of the card it was shown (parsed by the verifier)."""
    rows = len(turn.find_all(ROWS_RE, include_system=True))
    return f"Skill: rows={rows}; zone={'shown' if rate else 'missing'}; checksum={checksum or 'missing'}."


def load(turn):
    """The harness's own way to load the skill (None when it offers none)."""
    if "skill" in turn.tool_names:
        return native_tool("skill", {"name": SKILL})
    if "Skill" in turn.tool_names:
        return native_tool("Skill", {"skill": SKILL})
    location = turn.find(LOCATION_RE, include_system=True)
    # a location under a root alias (Codex 0.171.0+: "r1/<skill>/SKILL.md" with a "### Skill roots"
    # table saying what r1 is) is read where the table says it is
    return read_file(expand_skill_root(turn, location)) if location else None


def policy(turn):
    action = load(turn)
    if action is None:
        yield final(f"This harness offers no way to load the {SKILL} skill, so no quote was written. "
                    f"{account(turn, None, None)}")
        return
    res = yield action
    # what the model is shown after the load (the result itself, or a message the harness added)
    text = (res.text or "") + "\n" + turn.history_text
    m = re.search(ROW_RE, text)
    c = re.search(CHECKSUM_RE, text)
    rate, checksum = (int(m.group(1)) if m else None), (c.group(1) if c else None)
    note = account(turn, rate, checksum)
    quote = {"zone": ZONE, "weight_kg": WEIGHT, "rate_cents_per_kg": rate,
             "total_cents": rate * WEIGHT if rate is not None else None, "card_checksum": checksum}
    yield write_file("quote.json", json.dumps(quote))
    if rate is None:
        yield final(f"The card I was shown has no row for {ZONE}, so the quote has no rate. {note}")
        return
    yield final(f"Quoted {ZONE}: {rate * WEIGHT} cents. {note}")
