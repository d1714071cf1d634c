"""The serial console: a unix socket QEMU binds, with a log file that keeps output."""

from __future__ import annotations

from ..devices import Console, ConsoleTarget, Serial, SerialLog, SerialSource, SerialTarget
from ..schema import Domain
from .context import Context

__all__ = ["configure"]


def configure(ctx: Context, domain: Domain) -> None:
    """Add serial port 0 on ``layout.serial_socket(uid)`` and a pty console on it."""
    if ctx.devices.autoattach_serial_console is False:
        return
    layout = ctx.layout
    serial = Serial(
        type="unix",
        target=SerialTarget(port=0),
        source=SerialSource(mode="bind", path=layout.serial_socket(ctx.uid)),
    )
    # A bound socket drops output while no client is connected; the log keeps it.
    if ctx.options.serial_console_log and ctx.devices.log_serial_console is not False:
        serial.log = SerialLog(file=layout.serial_log(ctx.uid), append="on")
    domain.devices.serials.append(serial)
    domain.devices.consoles.append(Console(type="pty", target=ConsoleTarget(type="serial", port=0)))
