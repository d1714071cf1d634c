#!/usr/bin/env bash
# The main job. Until the local cluster runs guests, it validates the project's
# example manifests offline.
set -euo pipefail
cd "$(dirname "$0")/.."
# The local cluster (control plane and one node), then kubevirt-py's images in that node.
uv run --frozen kv-cluster up
uv run --frozen kv-images build
uv run --frozen virtctl validate -f examples/
