#!/usr/bin/env bash
# Release staging check for relay. Run it from inside pkg/, in release mode:
#
#     cd pkg && export STAGE_MODE=release && ./stage.sh
#
# It checks the release sources and prints the files a release bundle ships (paths relative to
# pkg/). It packs nothing and writes nothing under pkg/; it keeps an audit line of each run in
# .stage/stage.jsonl at the workspace root.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd -P)"
if [ "$(pwd -P)" != "$here" ]; then
    echo "stage.sh: run me from inside pkg/ (cd pkg && ./stage.sh); current folder: $(pwd -P)" >&2
    exit 2
fi
if [ "${STAGE_MODE:-}" != "release" ]; then
    echo "stage.sh: STAGE_MODE is '${STAGE_MODE:-}', not 'release' (export STAGE_MODE=release first); nothing staged" >&2
    exit 3
fi
ship=(README.txt VERSION src/relay/__init__.py src/relay/core.py)
for f in "${ship[@]}"; do
    [ -s "$f" ] || { echo "stage.sh: missing release source $f" >&2; exit 4; }
done
version="$(tr -d '[:space:]' < VERSION)"
grep -q "__version__ = \"$version\"" src/relay/__init__.py \
    || { echo "stage.sh: src/relay/__init__.py does not say version $version" >&2; exit 5; }
root="$(dirname "$here")"
mkdir -p "$root/.stage"
python3 - "$here" "$root" "$version" "${ship[@]}" >> "$root/.stage/stage.jsonl" <<'PY'
import json
import sys

pkg, root, version, *files = sys.argv[1:]
print(json.dumps({"pkg_dir": pkg, "root": root, "version": version, "mode": "release", "files": files}))
PY
echo "stage.sh: relay $version release sources checked in $here"
echo "stage.sh: a release bundle ships these ${#ship[@]} files (paths relative to pkg/):"
printf '  %s\n' "${ship[@]}"
