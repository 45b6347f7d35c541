#!/bin/sh
# Rebuild search shard B: ~6 s, fails part-way with its reason on stderr.
for i in 1 2 3; do echo "shard b: segment $i indexed"; sleep 2; done
echo "shard b failed: segment 4 checksum mismatch (expected 9f3c, got 1a07)" >&2
exit 3
