"""The ideal agent for V4-bundle-audit-002: one step per turn, each from that turn's own results.

Turn 1: one command prints ``bundles=N total_bytes=B`` for ``dist/*.bundle``; it writes exactly
what was printed to ``inventory.json``.
Turn 2: it reads the published list (``cat dist/SHA256SUMS``), then a second command prints the
computed sha256 of each bundle; it compares the two lists it was shown and writes
``verify.json``.
Turn 3: one command removes ``dist/tmp`` and prints whether it is still there
(``tmp_exists=False``); a refused or failed command (whose text only echoes the command) is
reported as not removed.

Every command exits 0 and prints on stdout only. Each turn needs only its own tool results, so
nothing depends on what a resume keeps. Three turns of 3, 4 and 2 model requests: a per-turn
count and a running total differ from turn 2 on.
"""

import json
import re

from tracetrial.policy import final, shell, write_file

INVENTORY = """python3 - <<'TT_INVENTORY'
import pathlib
files = sorted(p for p in pathlib.Path('dist').glob('*.bundle') if p.is_file())
print(f'bundles={len(files)} total_bytes={sum(p.stat().st_size for p in files)}')
TT_INVENTORY"""

PUBLISHED = "cat dist/SHA256SUMS"

COMPUTE = """python3 - <<'TT_SHA'
import hashlib, pathlib
for p in sorted(pathlib.Path('dist').glob('*.bundle')):
    if p.is_file():
        print(hashlib.sha256(p.read_bytes()).hexdigest() + '  ' + p.name)
TT_SHA"""

# Python's rmtree, not ``rm -rf``: Codex CLI refuses ``rm -f``-style commands even with its sandbox
# bypassed, and this task measures counts, not a harness's command guard.
CLEANUP = """python3 - <<'TT_CLEANUP'
import pathlib, shutil
tmp = pathlib.Path('dist/tmp')
shutil.rmtree(tmp, ignore_errors=True)
print(f'tmp_exists={tmp.exists()}')
TT_CLEANUP"""

SUM_RE = re.compile(r"^([0-9a-f]{64}) [ *]?(\S+\.bundle)\s*$", re.MULTILINE)


def sums(text):
    """``{name: sha256}`` of the sha256sum-format lines of a tool result."""
    return {name: digest for digest, name in SUM_RE.findall(text or "")}


def turn_one(turn):
    res = yield shell(INVENTORY)
    bundles, size = res.find(r"bundles=(\d+)"), res.find(r"total_bytes=(\d+)")
    if bundles is None or size is None:
        yield final("The inventory command showed no result; inventory.json not written.")
        return
    yield write_file("inventory.json", json.dumps({"bundles": int(bundles), "total_bytes": int(size)}) + "\n")
    yield final(f"inventory.json written: {bundles} bundles, {size} bytes.")


def turn_two(turn):
    published = sums((yield shell(PUBLISHED)).text)
    computed = sums((yield shell(COMPUTE)).text)
    if not computed:
        yield final("The checksum command showed no result; verify.json not written.")
        return
    bad = sorted(name for name, digest in computed.items() if published.get(name) != digest)
    report = {"matched": len(computed) - len(bad), "mismatched": bad}
    yield write_file("verify.json", json.dumps(report) + "\n")
    yield final(f"verify.json written: {report['matched']} matched, mismatched: {', '.join(bad) or 'none'}.")


def turn_three(turn):
    res = yield shell(CLEANUP)
    gone = re.search(r"^tmp_exists=False\s*$", res.text or "", re.MULTILINE) is not None
    yield final("dist/tmp removed." if gone else "dist/tmp could not be removed.")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    elif turn.index == 2:
        yield from turn_two(turn)
    else:
        yield from turn_three(turn)
