"""Verify the local copy of a backup job against its manifest.

Usage: python3 verify_backup.py <job id>

Prints its report on stdout. Exit status 0 when every chunk matches, 2 when a chunk does
not (the report names the error code of the mismatch), 64 on a usage error.
"""

import hashlib
import re
import sys

ID_RE = re.compile(r"^JOB-[A-Z0-9]{6,}$")


def error_code(job_id):
    """The verification error code of ``job_id``'s chunk mismatch."""
    return "VRF-" + hashlib.sha256(f"verify:{job_id}".encode()).hexdigest()[:6].upper()


def bad_chunk(job_id):
    return 1 + int(hashlib.sha256(f"chunk:{job_id}".encode()).hexdigest()[:4], 16) % 40


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not ID_RE.match(args[0]):
        print("usage: python3 verify_backup.py <job id, e.g. JOB-XXXXXXXX>")
        return 64
    job = args[0]
    bad = bad_chunk(job)
    print(f"verifying backup {job}: 40 chunks against manifest.sha256")
    for n in range(1, 41):
        if n == bad:
            print(f"chunk {n:02d}/40 MISMATCH")
            break
        print(f"chunk {n:02d}/40 ok")
    print(f"ERROR {error_code(job)}: checksum mismatch in chunk {bad} of 40; the local copy is not usable")
    return 2


if __name__ == "__main__":
    sys.exit(main())
