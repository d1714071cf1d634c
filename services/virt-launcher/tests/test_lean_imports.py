"""The launcher, one process per VM, does not load aiohttp (0.26 s and 13 MiB per start)."""

from __future__ import annotations

import subprocess
import sys


def test_the_launcher_entry_point_does_not_load_aiohttp() -> None:
    probe = (
        "import sys, virt_launcher.main, virt_launcher.converter; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'aiohttp'))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"
