#!/usr/bin/env bash
# The frameworks that import `llama_cpp`, on Baton's shim (issue 48), beyond
# what CI runs (scripts/test-python.sh runs langchain-community's): installs
# llama-index-core and llama-index-llms-llama-cpp into the package's venv
# (the latter without its dependencies: it requires llama-cpp-python, which
# would build llama.cpp and replace the shim), then runs tests/frameworks.
# About 20 s of install once per venv; outside CI to keep its time. Extra
# arguments go to pytest.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=$(bash scripts/setup-python-package.sh "llama-index-core>=0.12,<0.15" \
  "nodeps:llama-index-llms-llama-cpp>=0.4,<0.8" | tail -n 1)
cd crates/baton-python/tests
timeout 600 "$python" -m pytest -q -p no:cacheprovider "$@" frameworks
