#!/usr/bin/env bash
# Installs what kubevirt-py needs on a Debian bookworm host: Debian packages from
# tools/host-packages.txt, uv from PyPI, then the workspace from uv.lock.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t wanted < <(grep -v '^\s*#' tools/host-packages.txt | sed '/^\s*$/d')
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
    echo "host-setup: installing Debian packages: ${missing[*]}"
    sudo_cmd=(); [[ $(id -u) == 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v uv >/dev/null 2>&1; then
    echo "host-setup: installing uv from PyPI"
    python3 -m pip install --quiet 'uv>=0.9'
    # pip puts it beside that python3 (pyenv's pip hook refreshes the shims); say where if
    # that directory is not on PATH, since `make test` runs `uv` next.
    if ! command -v uv >/dev/null 2>&1; then
        scripts=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
        echo "host-setup: error: uv was installed into $scripts, which is not on PATH; add it" >&2
        exit 1
    fi
fi
# Bytecode is compiled here once: shells that set PYTHONDONTWRITEBYTECODE (this kind of
# machine does) otherwise recompile every import in every host process the tests start
# (≈ 3.5 s of CPU per virt-controller start). A stale .pyc is only ever ignored.
uv sync --frozen --quiet --compile-bytecode
uv run --frozen python -m compileall -q -j 0 libs services tools >/dev/null
echo "host-setup: ready"
