#!/usr/bin/env bash
# Inventory of one ingest shard: a long scan log with one SHARD-ID line.
set -euo pipefail
case "${1:-}" in
  a) id="ing-3e81d0" ;;
  b) id="ing-94c7a2" ;;
  c) id="ing-0f5b6e" ;;
  *) echo "usage: $0 a|b|c" >&2; exit 2 ;;
esac
for i in $(seq 1 60); do
  printf 'scan %s segment %03d: objects=%d bytes=%d checksum=ok\n' "$1" "$i" $((i * 37 % 101)) $((i * 4096))
done
echo "SHARD-ID: $id"
for i in $(seq 61 90); do
  printf 'scan %s segment %03d: objects=%d bytes=%d checksum=ok\n' "$1" "$i" $((i * 37 % 101)) $((i * 4096))
done
