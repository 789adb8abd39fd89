#!/usr/bin/env bash
# Fails when a source file includes from a layer above its own.
#
#   tools/check_layers.sh [ROOT]      # default: the repository root
#
# Layers, lowest first: phi/core, phi/kernels, distributed, paddle_like, tools. A file may
# include project headers of its own layer and of lower ones only (tests/ may include
# anything). Prints every violation as "file:line: <layer> includes <header> (<layer>)".
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$ROOT"

rank_of() {  # rank of a path's layer; empty when the path is in no layer
  case "$1" in
    phi/core/*) echo 0 ;;
    phi/kernels/*) echo 1 ;;
    distributed/*) echo 2 ;;
    paddle_like/*) echo 3 ;;
    tools/*) echo 4 ;;
    *) echo "" ;;
  esac
}

violations=0
checked=0
while IFS= read -r file; do
  checked=$((checked + 1))
  mine=$(rank_of "$file")
  [[ -z "$mine" ]] && continue
  while IFS=: read -r line header; do
    theirs=$(rank_of "$header")
    if [[ -n "$theirs" && "$theirs" -gt "$mine" ]]; then
      echo "$file:$line: ${file%%/*} layer includes \"$header\", a layer above it"
      violations=$((violations + 1))
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
           sed 's/^\([0-9]*\):.*"\([^"]*\)".*/\1:\2/' || true)
done < <(find phi distributed paddle_like tools -type f \( -name '*.h' -o -name '*.cc' \) 2>/dev/null | sort)

echo "check_layers: $checked files, $violations violation(s)"
((violations == 0))
