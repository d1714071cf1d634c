#!/usr/bin/env bash
# The main job. Until the local cluster runs guests, it validates the project's
# example manifests offline.
set -euo pipefail
cd "$(dirname "$0")/.."
uv run --frozen virtctl validate -f examples/
