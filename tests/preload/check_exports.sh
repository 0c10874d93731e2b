#!/usr/bin/env bash
# Usage: check_exports.sh LIBRARY EXPORTS_MAP
# Fails when the library's defined dynamic symbols differ from the names in the generated export list.
set -euo pipefail
lib=$1 map=$2
actual=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | sort -u)
expected=$(sed -n 's/^ *\([A-Za-z_][A-Za-z0-9_]*\);$/\1/p' "$map" | sort -u)
if [ "$actual" != "$expected" ]; then
  echo "exported symbols differ from $map:"
  diff <(echo "$expected") <(echo "$actual") || true
  exit 1
fi
echo "$(echo "$actual" | wc -l) symbols exported, all listed in the export map"
