"""Ledger shard seal: appends '<shard> <token>' to seals.log and prints the token.

Usage: python3 seal.py index|east|west
"""
import secrets
import sys

shard = sys.argv[1] if len(sys.argv) > 1 else ""
if shard not in ("index", "east", "west"):
    print("usage: python3 seal.py index|east|west", file=sys.stderr)
    sys.exit(2)
token = "SL-" + secrets.token_hex(5)
with open("seals.log", "a", encoding="utf-8") as fh:
    fh.write(f"{shard} {token}\n")
print(f"seal {shard}: {token}")
