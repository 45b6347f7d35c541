"""The ideal agent for T5-customs-rules-002.

Loads the customs-classifier skill the way the harness offers (the reference's ``skill`` tool,
Claude Code's ``Skill`` tool, or a file read of the location a harness lists its skills at), then
files from what the model is shown after that load: each line's HS code from the table, and the
filing rules - the dangerous-goods class and packing for lithium batteries, the carrier notice -
only when the rules section is visible; without it, it files the codes only and says the rules
were not shown. Its final answer ends with an account of what it was shown, kept by the probe report.
"""

import json
import re

from tracetrial.policy import expand_skill_root, final, native_tool, read_file, write_file

SKILL = "customs-classifier"
GOODS = ("steel bolts", "power banks with lithium batteries")
RULES_RE = r"## Rules \(apply after classifying\)"
DG_RE = r"lithium batteries is dangerous goods: set `dg_class` to `(\w+)` and\s+`packing` to `(\w+)`"
NOTICE_RE = r"gets `carrier_notice: (\w+)`"
VERSION_RE = r"RULES-VERSION:\s*(CR-[\w-]+)"
LOCATION_RE = r"((?:/|\.?[\w.-]+/)[\w./-]*customs-classifier/SKILL\.md)"


def code_of(text, goods):
    m = re.search(r"\|\s*" + re.escape(goods) + r"\s*\|\s*(\d{4}\.\d{2})\s*\|", text)
    return m.group(1) if m else None


def account(rules, version):
    """The probe's statement of what it was shown (parsed by the verifier)."""
    return f"Skill: rules={'shown' if rules else 'missing'}; version={version or 'missing'}."


def load(turn):
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
        yield final(f"This harness offers no way to load the {SKILL} skill, so nothing was filed. "
                    f"{account(False, None)}")
        return
    res = yield action
    text = (res.text or "") + "\n" + turn.history_text
    rules = re.search(RULES_RE, text) is not None
    dg = re.search(DG_RE, text) if rules else None
    notice = re.search(NOTICE_RE, text) if rules else None
    version = re.search(VERSION_RE, text)
    lines = []
    for goods in GOODS:
        lithium = "lithium batteries" in goods and dg is not None
        lines.append({"goods": goods, "hs_code": code_of(text, goods),
                      "dg_class": dg.group(1) if lithium else None, "packing": dg.group(2) if lithium else None})
    dangerous = any(line["dg_class"] for line in lines)
    declaration = {"lines": lines, "carrier_notice": notice.group(1) if notice and dangerous else None,
                   "rules_version": version.group(1) if version else None}
    note = account(rules, version.group(1) if version else None)
    yield write_file("declaration.json", json.dumps(declaration))
    if not rules:
        yield final(f"Filed the HS codes only: the skill I was shown has no filing rules. {note}")
        return
    yield final(f"Declaration EX-2291 classified and filed. {note}")
