"""Serial console on a unix socket with a log."""

from __future__ import annotations

from collections.abc import Callable

from virt_domain import ConverterOptions, Domain, LauncherLayout

Converter = Callable[..., Domain]


def test_serial_socket_and_log_from_layout(to_domain: Converter) -> None:
    domain = to_domain(layout=LauncherLayout(private_dir="/run/kv"))
    (serial,) = domain.devices.serials
    assert serial.source is not None
    assert (serial.type, serial.source.mode, serial.source.path) == (
        "unix",
        "bind",
        "/run/kv/0b5e5a6c-uid/virt-serial0",
    )
    assert serial.log is not None
    assert (serial.log.file, serial.log.append) == ("/run/kv/0b5e5a6c-uid/virt-serial0-log", "on")
    (console,) = domain.devices.consoles
    assert console.target is not None
    assert (console.type, console.target.type, console.target.port) == ("pty", "serial", 0)


def test_log_can_be_turned_off(to_domain: Converter) -> None:
    assert (
        to_domain(options=ConverterOptions(serial_console_log=False)).devices.serials[0].log is None
    )
    assert to_domain({"devices": {"logSerialConsole": False}}).devices.serials[0].log is None


def test_no_console_when_autoattach_is_off(to_domain: Converter) -> None:
    domain = to_domain({"devices": {"autoattachSerialConsole": False}})
    assert (domain.devices.serials, domain.devices.consoles) == ([], [])
