#!/usr/bin/env bash
# The layer check must be able to fail: a tree where phi/core includes distributed/ and
# distributed/ includes tools/ gives exactly two violations and a non-zero exit; the same
# tree without them passes.
set -uo pipefail
CHECK=${1:?usage: detects_violation.sh path/to/check_layers.sh}
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/phi/core" "$tree/distributed" "$tree/tools/x"
printf '#include "phi/core/ok.h"\n#include "distributed/pg.h"\n' > "$tree/phi/core/bad.h"
printf '#pragma once\n' > "$tree/phi/core/ok.h"
printf '#include "phi/core/ok.h"\n  #  include "tools/x/t.h"\n' > "$tree/distributed/pg.h"
printf '#include "distributed/pg.h"\n' > "$tree/tools/x/t.h"
out=$("$CHECK" "$tree"); rc=$?
echo "$out"
if ((rc == 0)) || [[ $(grep -c 'a layer above it' <<<"$out") -ne 2 ]]; then
  echo "FAIL: expected two violations and a non-zero exit"; exit 1
fi
sed -i '/distributed\/pg.h/d' "$tree/phi/core/bad.h"
sed -i '/tools\/x\/t.h/d' "$tree/distributed/pg.h"
if ! "$CHECK" "$tree"; then echo "FAIL: a clean tree was rejected"; exit 1; fi
echo "PASS"
