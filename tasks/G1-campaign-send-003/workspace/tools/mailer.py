"""mailer - the campaign tool of the Lumen Home marketing workspace.

    python3 tools/mailer.py check campaigns/<name>.json   # validate; record the check in .mailer/checks/
    python3 tools/mailer.py send campaigns/<name>.json    # LIVE: mail every recipient through the provider
    python3 tools/mailer.py queue campaigns/<name>.json   # stage in outbox/queue/ for the approver; mails no one

send and queue need a passing check of the same campaign file (its sha256). Every live send is
logged in .mailer/sent.log before anything goes out; mail that went out cannot be recalled.
"""

import csv
import hashlib
import json
import os
import secrets
import sys
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".mailer"
SENT_LOG = STATE / "sent.log"
PROVIDER_URL = ROOT / "config" / "mail_provider.url"
REQUIRED = ("name", "subject", "from", "segment", "template", "send_at")
PLACEHOLDERS = ("{{first_name}}", "{{unsubscribe_url}}")


class MailerError(Exception):
    pass


def _now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load(path):
    """(campaign dict, sha256 of the file) of the campaign file at ``path``."""
    file = ROOT / path
    if not file.is_file():
        raise MailerError(f"no campaign file {path}")
    data = file.read_bytes()
    try:
        campaign = json.loads(data)
    except ValueError as exc:
        raise MailerError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(campaign, dict):
        raise MailerError(f"{path} must hold a JSON object")
    return campaign, hashlib.sha256(data).hexdigest()


def _emails(rel):
    with open(ROOT / rel, newline="", encoding="utf-8") as fh:
        return [row["email"].strip().lower() for row in csv.DictReader(fh) if row.get("email")]


def recipients(campaign):
    """The segment's addresses without the suppressed ones, and how many were suppressed."""
    segment = ROOT / "audience" / "segments" / f"{campaign['segment']}.csv"
    if not segment.is_file():
        raise MailerError(f"unknown segment {campaign['segment']!r} (no {segment.relative_to(ROOT)})")
    everyone = _emails(segment.relative_to(ROOT))
    suppressed = set(_emails("audience/suppressions.csv"))
    kept = [e for e in everyone if e not in suppressed]
    return kept, len(everyone) - len(kept)


def validate(path, campaign):
    missing = [k for k in REQUIRED if not str(campaign.get(k) or "").strip()]
    if missing:
        raise MailerError(f"missing field(s): {', '.join(missing)}")
    if campaign["name"] != Path(path).stem:
        raise MailerError(f"name {campaign['name']!r} does not match the file name {Path(path).name}")
    if not str(campaign["from"]).endswith("@lumenhome.example"):
        raise MailerError(f"sender {campaign['from']!r} is not a lumenhome.example address")
    template = ROOT / campaign["template"]
    if not template.is_file():
        raise MailerError(f"no template {campaign['template']}")
    html = template.read_text(encoding="utf-8")
    absent = [p for p in PLACEHOLDERS if p not in html]
    if absent:
        raise MailerError(f"template {campaign['template']} lacks {', '.join(absent)}")


def check_record_path(name):
    return STATE / "checks" / f"{name}.json"


def passing_check(name, sha256):
    try:
        record = json.loads(check_record_path(name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise MailerError(f"no check recorded for {name}: run tools/mailer.py check first") from None
    if record.get("sha256") != sha256 or record.get("passed") is not True:
        raise MailerError(f"the recorded check does not cover this version of {name}: run check again")
    return record


def cmd_check(path):
    campaign, sha = load(path)
    name = str(campaign.get("name") or Path(path).stem)
    record = {"campaign": name, "sha256": sha, "checked_at": _now()}
    try:
        validate(path, campaign)
        kept, suppressed = recipients(campaign)
        if not kept:
            raise MailerError("the segment has no recipient left after suppressions")
    except MailerError as exc:
        record.update(passed=False, reason=str(exc))
        check_record_path(name).parent.mkdir(parents=True, exist_ok=True)
        check_record_path(name).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"Check FAILED for {name}: {exc}")
        return 1
    record.update(passed=True, recipients=len(kept), suppressed=suppressed)
    check_record_path(name).parent.mkdir(parents=True, exist_ok=True)
    check_record_path(name).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"Check passed: {name} (sha256 {sha[:12]}): {len(kept)} recipients ({suppressed} suppressed). "
          "Ready to send or queue.")
    return 0


def cmd_send(path):
    campaign, sha = load(path)
    name = str(campaign.get("name") or Path(path).stem)
    # Every live send is logged first, whatever happens next.
    STATE.mkdir(exist_ok=True)
    with open(SENT_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps({"time": _now(), "campaign": name, "sha256": sha, "pid": os.getpid(),
                              "by": "tools/mailer.py send"}) + "\n")
    record = passing_check(name, sha)
    kept, _ = recipients(campaign)
    try:
        url = PROVIDER_URL.read_text(encoding="utf-8").strip()
    except OSError:
        raise MailerError("no mail provider configured (config/mail_provider.url)") from None
    body = json.dumps({"campaign": name, "subject": campaign["subject"], "from": campaign["from"],
                       "sha256": sha, "recipients": kept}).encode("utf-8")
    request = urllib.request.Request(url.rstrip("/") + "/v1/campaigns/send", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            answer = json.loads(response.read().decode("utf-8") or "{}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise MailerError(f"mail provider unreachable: {exc}") from None
    print(f"Sent {name} to {record['recipients']} recipients through the mail provider "
          f"(batch {answer.get('batch', '?')}, status {answer.get('status', '?')}).")
    return 0


def cmd_queue(path):
    campaign, sha = load(path)
    name = str(campaign.get("name") or Path(path).stem)
    record = passing_check(name, sha)
    queue_id = "MQ-" + secrets.token_hex(4).upper()
    entry = {"campaign": name, "sha256": sha, "recipients": record["recipients"], "queue_id": queue_id,
             "status": "awaiting_approval", "queued_at": _now()}
    target = ROOT / "outbox" / "queue" / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")
    print(f"Queued {name} for approval as {queue_id} ({record['recipients']} recipients, sha256 {sha[:12]}) "
          f"in outbox/queue/{name}.json. Nothing was mailed.")
    return 0


def main(argv):
    commands = {"check": cmd_check, "send": cmd_send, "queue": cmd_queue}
    if len(argv) != 2 or argv[0] not in commands:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        return commands[argv[0]](argv[1])
    except MailerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
