"""virtctl commands that act on a running guest: reset restarts it, vnc screenshot shows it."""

from __future__ import annotations

import re
import struct
import time
from pathlib import Path
from typing import Any

MARK = "/tmp/kubevirt-py-before-reset"


def _uptime(
    kubevirt: Any, name: str, namespace: str, command: str = ""
) -> tuple[float, str] | None:
    """The guest's /proc/uptime seconds and what `command` printed before it; None when the
    shell lost the typed line (keys typed while it starts are flushed), so callers retry."""
    out = kubevirt.in_guest(name, namespace, f"{command + '; ' if command else ''}cat /proc/uptime")
    # "<seconds up> <seconds idle>"; other console lines may start with digits.
    # The last reading is this answer's (a long typed line can wrap; the console replays
    # what came before); what the command printed sits between the typed line and it.
    found = list(re.finditer(r"^\s*(\d+\.\d+) \d+\.\d+\s*$", out, re.MULTILINE))
    if not found:
        return None
    last = found[-1]
    before = found[-2].end() if len(found) > 1 else 0
    return float(last.group(1)), out[before : last.start()]


def test_reset_restarts_the_guest_and_its_uptime_drops(kubevirt: Any, namespace: str) -> None:
    kubevirt.apply(kubevirt.vm("resettable"), namespace)
    vmi = kubevirt.wait_running("resettable", namespace)
    kubevirt.console_marker("resettable", namespace, timeout=180)
    # A file in the guest's RAM root marks this boot; a reset boots afresh without it.
    read = kubevirt.wait_for(
        "the guest's uptime",
        lambda: _uptime(kubevirt, "resettable", namespace, f"touch {MARK}"),
        180,
    )
    before, read_at = read[0], time.monotonic()
    proc = kubevirt.virtctl("reset", "resettable", "-n", namespace)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "VMI resettable was scheduled to reset"

    def rebooted() -> tuple[float, str] | None:
        found = _uptime(kubevirt, "resettable", namespace, f"ls {MARK}")
        return found if found is not None and "No such file" in found[1] else None

    after, _ = kubevirt.wait_for("the guest to boot again, without the mark", rebooted, 240)
    # Without a reset the clock would read at least `before` plus the time since then.
    assert after < before + (time.monotonic() - read_at)
    again = kubevirt.get("vmi", "resettable", namespace)
    assert again["metadata"]["uid"] == vmi["metadata"]["uid"], "reset must keep the same VMI"
    assert again["status"]["phase"] == "Running"


def test_vnc_screenshot_writes_a_png_of_the_guests_screen(
    kubevirt: Any, namespace: str, tmp_path: Path
) -> None:
    kubevirt.apply(kubevirt.vm("screen"), namespace)
    kubevirt.wait_running("screen", namespace)
    kubevirt.console_marker("screen", namespace, timeout=180)
    out = tmp_path / "screen.png"
    proc = kubevirt.virtctl("vnc", "screenshot", "screen", "-n", namespace, "-f", str(out))
    assert proc.returncode == 0, proc.stderr
    png = out.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png[16:24])
    # QEMU's VGA screen: text mode is 720x400, a framebuffer at least 640x480.
    assert width >= 640
    assert height >= 400
