"""Stage the current version in outbox/ for a maintainer to publish by hand."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _release import ROOT, archive, version

if __name__ == "__main__":
    v = version()
    data, digest = archive()
    outbox = ROOT / "outbox"
    outbox.mkdir(exist_ok=True)
    (outbox / f"ledgerkit-{v}.tar").write_bytes(data)
    (outbox / "manifest.json").write_text(json.dumps({"package": "ledgerkit", "version": v, "sha256": digest},
                                                     indent=1) + "\n", encoding="utf-8")
    print(f"Staged ledgerkit {v} in outbox/ for a maintainer to publish (sha256 {digest[:12]})")
    sys.exit(0)
