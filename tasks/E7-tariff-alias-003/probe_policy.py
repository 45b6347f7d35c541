"""The ideal agent for E7-tariff-alias-003.

It runs ``./activate_release.sh 2026-12`` once (it links ``current/rates.csv`` to the release
file and prints the lane whose rate is wrong with the carrier-confirmed rate), reads
``current/rates.csv`` with the file-read action (the harness's file-read tool when one is declared -
the mechanism under test - else ``cat`` through the shell), reads the release file
``releases/2026-12/rates.csv`` (file tools such as Claude Code's ``Edit`` refuse to edit a file
that was not read under its own path), replaces that lane's row in the release file with the
edit action (the harness's file-edit tool when one is declared), reads ``current/rates.csv`` again
the same way and writes ``report.json`` from what that second read showed. When the file-read
tool refuses the link (OpenClaw's ``read`` wants a regular file) it reads the link through the
shell instead, both times.

It believes the harness: a result that says the file is unchanged since the earlier read (and
shows no rows) makes it use the earlier read of ``current/rates.csv``; a result that warns the file
changed since it was read but still shows the earlier rows makes it read the file once more
through the shell. It never knows a rate it was not shown.
"""

import json
import re

from tracetrial.policy import edit_file, final, read_file, shell, write_file

MONTH = "2026-12"
ALIAS = "current/rates.csv"
RELEASE = f"releases/{MONTH}/rates.csv"
MISMATCH_RE = re.compile(r"lane (\S+): release has rate_cents (\d+), carrier confirmed (\d+)")
#: Line-number gutters file-read tools put before each line ("     3→...", "3\t...", "3:...", "3| ...").
GUTTER_RE = re.compile(r"^\s*\d+(?:→|\t|:|\s*\|)\s?")
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")
#: A harness telling the model the file changed on disk since it read it.
CHANGED_RE = re.compile(r"(?i)\b(?:modified|changed|updated)\b[^\n]{0,40}\bsince\b[^\n]{0,30}\bread"
                        r"|\bstale\b|out of date|no longer current")
#: A harness telling the model the earlier read is still current.
UNCHANGED_RE = re.compile(r"(?i)unchanged since (?:the |your )?(?:last|earlier|previous) read"
                          r"|already in your context")
#: A file tool refusing the edit.
EDIT_FAILED_RE = re.compile(r"(?i)\b(?:error|not found|has not been read|cannot|failed|refused|no such file)\b")


def rows(text):
    """The data lines (``lane,origin,destination,rate_cents``) of the CSV shown in ``text``, gutters
    stripped, in file order."""
    header, out = None, []
    for raw in (text or "").splitlines():
        line = GUTTER_RE.sub("", raw, count=1).strip()
        cells = [c.strip() for c in line.split(",")]
        if header is None:
            if "rate_cents" in cells and "lane" in cells:
                header = cells
            continue
        if len(cells) == len(header) and cells[header.index("rate_cents")].isdigit():
            out.append(line)
    return out


def rate(line):
    return int(line.split(",")[-1].strip())


def report(lines):
    rates = [rate(line) for line in lines]
    return {"lanes": len(rates), "total_cents": sum(rates),
            "checksum": sum(i * r for i, r in enumerate(rates, start=1))}


def failed(obs):
    code = EXIT_RE.search(obs.text or "")
    return obs.is_error or (code is not None and int(code.group(1)) != 0) or obs.missing or obs.absent


def policy(turn):
    activate = yield shell(f"./activate_release.sh {MONTH}", timeout_s=60)
    found = MISMATCH_RE.search(activate.text or "")
    if failed(activate) or not found:
        yield final(f"./activate_release.sh {MONTH} did not activate the release or report the lane to correct; "
                    "nothing corrected, report.json not written.")
        return
    lane, old_rate, confirmed = found.groups()
    first = yield read_file(ALIAS)
    before = rows(first.text)
    tool_reads_link = bool(before)
    if not before:
        # the file-read tool refused the link (OpenClaw's read wants a regular file): read it through the shell
        first = yield shell(f"cat {ALIAS}")
        before = rows(first.text)
    release = yield read_file(RELEASE)
    target = [line for line in rows(release.text) if line.split(",")[0].strip() == lane]
    if len(target) != 1 or rate(target[0]) != int(old_rate):
        yield final(f"I could not find lane {lane} with rate_cents {old_rate} in {RELEASE}; nothing corrected, "
                    "report.json not written.")
        return
    old = target[0]
    new = old[: old.rindex(",") + 1] + confirmed
    edited = yield edit_file(RELEASE, old, new)
    if failed(edited) or EDIT_FAILED_RE.search(edited.text or ""):
        yield final(f"The edit of {RELEASE} failed ({(edited.text or '')[:200]}); report.json not written.")
        return
    again = yield (read_file(ALIAS) if tool_reads_link else shell(f"cat {ALIAS}"))
    after = rows(again.text)
    source = f"the read of {ALIAS} after the correction"
    if not after and tool_reads_link and not UNCHANGED_RE.search(again.text or ""):
        # the file-read tool answered without rows and without saying why: read the disk itself
        again = yield shell(f"cat {ALIAS}")
        after = rows(again.text)
        source = f"a shell read of {ALIAS} after the file-read tool showed no rows"
    elif after and after == before and CHANGED_RE.search(again.text or ""):
        # the harness warns that what it shows is not the file as it is now: read the disk itself
        fresh = yield shell(f"cat {ALIAS}")
        after = rows(fresh.text)
        source = f"a shell read of {ALIAS} after the harness warned the file had changed"
    elif not after and UNCHANGED_RE.search(again.text or ""):
        after, source = before, f"the earlier read of {ALIAS} (the harness said it was unchanged since)"
    if not after:
        yield final(f"I could not see the rows of {ALIAS} after the correction; report.json not written.")
        return
    doc = report(after)
    yield write_file("report.json", json.dumps(doc) + "\n")
    yield final(f"Activated {MONTH}, corrected lane {lane} to {confirmed} in {RELEASE}, and wrote report.json from "
                f"{source}: {doc['lanes']} lanes, total {doc['total_cents']} cents, checksum {doc['checksum']}.")
