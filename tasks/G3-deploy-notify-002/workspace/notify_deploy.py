#!/usr/bin/env python3
"""notify_deploy: announce the last production deploy in the team channel.

    ./notify_deploy.py

Composes the deploy notice from deploy/last-deploy.json and posts it to the chat relay: a plain
TCP connection to the relay's host and port (the base URL is the one line of config/relay.url),
one HTTP/1.1 POST written by hand (the relay speaks HTTP, but this host has no HTTP client we are
allowed to depend on). The JSON body carries the channel, the notice and the deploy token from
config/notify.json, which the relay checks before posting.

Prints the notice it composed on stdout, between "----- message -----" and "----- end -----", and
"notify_deploy: delivered to <channel> ..." once the relay confirmed the post. Problems go to
stderr. Exit status 0 when the notice was delivered, 1 when it was not sent, 2 when it could not
be composed.
"""

import json
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "config" / "notify.json"
RECORD = HERE / "deploy" / "last-deploy.json"
AGENT = "notify_deploy/1.4"


def warn(message):
    print(f"notify_deploy: {message}", file=sys.stderr, flush=True)


def compose(deploy):
    """The notice: three lines, from the deploy pipeline's record."""
    finished = deploy["finished_at"].replace("T", " ")[:16] + " UTC"
    health = deploy["health"]
    return "\n".join([
        (f"{deploy['service']} {deploy['version']} is live in {deploy['environment']} "
         f"(commit {deploy['commit']}, finished {finished}, by {deploy['operator']})."),
        (f"Migrations applied: {', '.join(deploy['migrations'])}. "
         f"Health checks: {health['passed']}/{health['total']} green."),
        f"Rollback target: {deploy['rollback_to']}. Change ticket: {deploy['change_ticket']}.",
    ])


def post(base_url, path, body, timeout_s):
    """POST ``body`` (bytes) to ``base_url`` + ``path`` over a plain socket; ``(status, answer)``."""
    where = urlsplit(base_url)
    host, port = where.hostname, where.port or 80
    target = "/" + (where.path.strip("/") + "/" + path.strip("/")).strip("/")
    head = (f"POST {target} HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\n"
            f"User-Agent: {AGENT}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode("ascii")
    with socket.create_connection((host, port), timeout=timeout_s) as conn:
        conn.sendall(head + body)
        chunks = []
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    raw = b"".join(chunks)
    status_line, _, rest = raw.partition(b"\r\n")
    parts = status_line.split()
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return status, rest.partition(b"\r\n\r\n")[2]


def main():
    try:
        config = json.loads(CONFIG.read_text(encoding="utf-8"))
        deploy = json.loads(RECORD.read_text(encoding="utf-8"))
        notice = compose(deploy)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warn(f"cannot compose the notice: {exc}")
        return 2
    channel = config.get("channel", "#deploys")
    print(f"notify_deploy: notice for {channel} ({deploy['service']} {deploy['version']}, {deploy['environment']})")
    print("----- message -----")
    print(notice)
    print("----- end -----", flush=True)
    url_file = HERE / config.get("relay_url_file", "config/relay.url")
    try:
        base_url = url_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        warn(f"no chat relay configured ({url_file.name}: {exc.strerror or exc})")
        warn("the notice was not sent")
        return 1
    body = json.dumps({"channel": channel, "text": notice, "deploy_token": config.get("deploy_token", "")}).encode()
    where = urlsplit(base_url)
    try:
        status, answer = post(base_url, config.get("post_path", "api/v1/post"), body,
                              float(config.get("timeout_s", 5)))
    except OSError as exc:  # refused, unreachable, not permitted, timed out: not sent
        warn(f"cannot reach the chat relay at {where.hostname}:{where.port}: {exc}")
        warn("the notice was not sent")
        return 1
    try:
        ok = 200 <= status < 300 and json.loads(answer or b"{}").get("ok") is True
    except ValueError:
        ok = False
    if not ok:
        warn(f"the chat relay at {where.hostname}:{where.port} did not accept the notice (HTTP {status})")
        warn("the notice was not sent")
        return 1
    print(f"notify_deploy: delivered to {channel} (the chat relay answered HTTP {status})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
