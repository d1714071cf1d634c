"""A writer for the `newc` cpio format, the one the Linux kernel unpacks as an initramfs.

Written here (not by the cpio tool) so that device nodes and owners need no root and the
archive's bytes depend only on its entries.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from typing import BinaryIO

__all__ = ["CpioEntry", "write_newc"]

_TRAILER = "TRAILER!!!"


@dataclass(frozen=True)
class CpioEntry:
    """One archive member: `path` is relative (no leading slash), `mode` includes the type bits."""

    path: str
    mode: int
    data: bytes = b""
    uid: int = 0
    gid: int = 0
    rdev_major: int = 0
    rdev_minor: int = 0

    @classmethod
    def directory(cls, path: str, perm: int = 0o755) -> CpioEntry:
        return cls(path, stat.S_IFDIR | perm)

    @classmethod
    def file(cls, path: str, data: bytes, perm: int = 0o644) -> CpioEntry:
        return cls(path, stat.S_IFREG | perm, data)

    @classmethod
    def symlink(cls, path: str, target: str) -> CpioEntry:
        return cls(path, stat.S_IFLNK | 0o777, target.encode())

    @classmethod
    def char_device(cls, path: str, major: int, minor: int, perm: int = 0o600) -> CpioEntry:
        return cls(path, stat.S_IFCHR | perm, rdev_major=major, rdev_minor=minor)


def _pad(length: int) -> bytes:
    return b"\0" * (-length % 4)


def write_newc(out: BinaryIO, entries: list[CpioEntry]) -> None:
    """Write `entries` in order, then the trailer; mtimes are 0 so the output is reproducible."""
    for ino, entry in enumerate([*entries, CpioEntry(_TRAILER, 0)], start=1):
        if entry.path.startswith("/") or ".." in entry.path.split("/"):
            raise ValueError(f"cpio entry path must be relative without '..': {entry.path!r}")
        name = entry.path.encode() + b"\0"
        nlink = 2 if stat.S_ISDIR(entry.mode) else 1
        fields = (
            ino if entry.path != _TRAILER else 0,
            entry.mode,
            entry.uid,
            entry.gid,
            nlink if entry.path != _TRAILER else 1,
            0,  # mtime
            len(entry.data),
            0,  # dev major
            0,  # dev minor
            entry.rdev_major,
            entry.rdev_minor,
            len(name),
            0,  # check
        )
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        out.write(header + name + _pad(len(header) + len(name)))
        out.write(entry.data + _pad(len(entry.data)))
