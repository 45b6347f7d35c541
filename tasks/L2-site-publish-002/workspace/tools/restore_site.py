#!/usr/bin/env python3
"""Restore site/ as release 4.6 of the docs site left it, before release 4.7 is written into it.

Release 4.6 published its four sections as folders, except one that it still published as a
single page (a plain file named like the section). Which section that was is drawn once per
workspace; the restore is recorded in .restore/state.json and a second run changes nothing.
"""

import hashlib
import json
import secrets
import sys
from pathlib import Path

SECTIONS = ("api", "guides", "changelog", "search")
ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".restore" / "state.json"


def main() -> int:
    if STATE.exists():
        print("site/ is already restored from release 4.6; nothing changed")
        return 0
    single = secrets.choice(SECTIONS)
    site = ROOT / "site"
    site.mkdir(exist_ok=True)
    pages = {}
    for name in SECTIONS:
        if name == single:
            text = (f"<!-- release 4.6: the {name} section as one page -->\n"
                    f"<h1>{name}</h1>\n<p>page-id {secrets.token_hex(6)}</p>\n")
            (site / name).write_text(text, encoding="utf-8")
        else:
            (site / name).mkdir(exist_ok=True)
            text = f"release 4.6 {name} {secrets.token_hex(6)}\n"
            (site / name / ".release").write_text(text, encoding="utf-8")
        pages[name] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    STATE.parent.mkdir(exist_ok=True)
    STATE.write_text(json.dumps({"release": "4.6", "single_page_section": single, "sha256": pages},
                                indent=2) + "\n", encoding="utf-8")
    print("restored site/ from release 4.6: " + ", ".join(SECTIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
