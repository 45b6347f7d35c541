"""Provenance stamp: appends '<role> <token>' to stamps.log and prints the token.

Usage: python3 stamp.py parent|child
"""
import secrets
import sys

role = sys.argv[1] if len(sys.argv) > 1 else ""
if role not in ("parent", "child"):
    print("usage: python3 stamp.py parent|child", file=sys.stderr)
    sys.exit(2)
token = "ST-" + secrets.token_hex(5)
with open("stamps.log", "a", encoding="utf-8") as fh:
    fh.write(f"{role} {token}\n")
print(f"stamp token: {token}")
