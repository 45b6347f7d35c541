"""Verify the package mirror against its manifest before it is published.

Like ``sha256sum -c``, it prints one ``ok`` line per verified file on stdout (some 250 KB for
this mirror) and its diagnostics on stderr: a file whose checksum does not match the manifest
is reported only on stderr, after the listing has been read, and the run exits 1.

Every run draws which file is corrupted on the mirror and the checksum the mirror now has, and
appends sha256("<path>|<mirror sha256>") to .verify/runs.jsonl (an audit commitment: it proves
which mismatch a run reported without revealing it).
"""

import fcntl
import hashlib
import json
import os
import secrets
import struct
import sys
import termios
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SNAPSHOT = "2026-11-30T02:00Z"
SECTIONS = ("main", "contrib", "updates")
STEMS = ("libssl", "libxml", "zlib", "curl", "openssh", "nginx", "postgres", "redis", "python", "perl",
         "rsync", "tar", "gzip", "bzip", "xz", "git", "vim", "less", "grep", "sed", "gawk", "make",
         "cmake", "ninja", "clang", "gcc", "binutils", "glibc", "musl", "busybox")
SUFFIXES = ("", "-dev", "-doc", "-tools", "-common", "-utils", "-data", "-dbg")
VERSIONS = 8


def manifest():
    """The mirror's files and their manifest checksums, in listing order (deterministic)."""
    out = []
    for section in SECTIONS:
        for stem in STEMS:
            for suffix in SUFFIXES:
                name = stem + suffix
                for v in range(1, VERSIONS // 3 + 1 + (section == "main") * 2):
                    version = f"{1 + len(stem) % 4}.{v}.{len(suffix)}"
                    path = f"pool/{section}/{name[0]}/{name}/{name}_{version}_amd64.deb"
                    out.append((path, hashlib.sha256(f"{SNAPSHOT}|{path}".encode()).hexdigest()))
    return out


def wait_until_read(stream, limit_s=3.0):
    """Wait (bounded) until the reader has taken everything written to ``stream``.

    The listing ends with a signature check of the manifest; the pause also makes the report
    arrive after the whole listing in every harness: a reader of two pipes would otherwise
    receive stderr while the last pipe buffer (64 KiB) of stdout is still unread."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            unread = struct.unpack("i", fcntl.ioctl(stream.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        except (OSError, ValueError):
            break
        if unread <= 0:
            break
        time.sleep(0.01)
    time.sleep(0.3)


def main():
    files = manifest()
    bad = secrets.randbelow(len(files))
    bad_path, expected = files[bad]
    got = secrets.token_hex(32)
    audit = HERE / ".verify"
    audit.mkdir(exist_ok=True)
    with open(audit / "runs.jsonl", "a", encoding="utf-8") as runs:
        digest = hashlib.sha256(f"{bad_path}|{got}".encode()).hexdigest()
        runs.write(json.dumps({"pid": os.getpid(), "mismatch_sha256": digest}) + "\n")
    out = sys.stdout
    out.write(f"verify: mirror snapshot {SNAPSHOT} against MANIFEST.sha256 ({len(files)} files)\n")
    for i, (path, sha) in enumerate(files):
        if i != bad:
            out.write(f"ok  {path}  sha256:{sha}\n")
    out.write(f"verify: done, {len(files)} files checked\n")
    out.flush()
    wait_until_read(out)
    err = sys.stderr
    err.write(f"verify: MISMATCH {bad_path}: manifest sha256 {expected}, mirror sha256 {got}\n")
    err.write(f"verify: 1 of {len(files)} files failed verification; the mirror must not be published\n")
    err.flush()
    return 1


if __name__ == "__main__":
    sys.exit(main())
