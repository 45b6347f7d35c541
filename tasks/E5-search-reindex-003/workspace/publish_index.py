"""Publish a search-index generation: make it the live index.

Usage: python3 publish_index.py <generation>

Points search/CURRENT at the generation (the search service follows it) and logs the switch in
.rebuild/publish.jsonl. It does not inspect the generation: publish only a generation whose
rebuild exited with status 0.
"""

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv):
    if len(argv) != 1:
        print("usage: python3 publish_index.py <generation>", file=sys.stderr)
        return 2
    generation = argv[0]
    folder = HERE / "search" / "generations" / generation
    if not generation.startswith("gen-") or not folder.is_dir():
        print(f"publish: no generation {generation!r} in search/generations", file=sys.stderr)
        return 2
    current = HERE / "search" / "CURRENT"
    previous = current.read_text(encoding="utf-8").strip()
    current.write_text(generation + "\n", encoding="utf-8")
    (HERE / ".rebuild").mkdir(exist_ok=True)
    with open(HERE / ".rebuild" / "publish.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "generation": generation, "previous": previous}) + "\n")
    print(f"publish: {generation} is live (was {previous})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
