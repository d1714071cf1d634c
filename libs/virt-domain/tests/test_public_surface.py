"""The package's heavy names load on first use: the launcher-pod contract alone loads
neither the API models nor the converter, and every public name still resolves."""

from __future__ import annotations

import subprocess
import sys

import virt_domain

HEAVY = {"kubevirt_api", "marshmallow", "virt_domain.converter", "virt_domain.cloudinit"}


def test_the_contract_alone_loads_nothing_heavy_and_every_name_resolves() -> None:
    probe = f"import sys, virt_domain.launcher_pod; print(sorted(set(sys.modules) & {HEAVY!r}))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"
    assert [name for name in virt_domain.__all__ if not hasattr(virt_domain, name)] == []
