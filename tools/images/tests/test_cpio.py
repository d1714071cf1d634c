"""The newc writer produces what the kernel's initramfs unpacker reads."""

from __future__ import annotations

import io
import stat

import pytest
from kv_images.cpio import CpioEntry, write_newc


def _read(data: bytes) -> list[tuple[str, int, bytes, int, int]]:
    entries = []
    offset = 0
    while True:
        header = data[offset : offset + 110]
        assert header[:6] == b"070701"
        fields = [int(header[6 + 8 * i : 14 + 8 * i], 16) for i in range(13)]
        mode, filesize, rmaj, rmin, namesize = (
            fields[1],
            fields[6],
            fields[9],
            fields[10],
            fields[11],
        )
        name_start = offset + 110
        name = data[name_start : name_start + namesize - 1].decode()
        body_start = name_start + namesize
        body_start += -body_start % 4
        body = data[body_start : body_start + filesize]
        offset = body_start + filesize
        offset += -offset % 4
        if name == "TRAILER!!!":
            return entries
        entries.append((name, mode, body, rmaj, rmin))


def test_entries_round_trip_with_types_and_alignment() -> None:
    out = io.BytesIO()
    write_newc(
        out,
        [
            CpioEntry.directory("etc"),
            CpioEntry.file("etc/inittab", b"::sysinit:/etc/rcS\n"),
            CpioEntry.symlink("init", "/bin/busybox"),
            CpioEntry.char_device("dev/console", 5, 1),
        ],
    )
    data = out.getvalue()
    assert len(data) % 4 == 0
    read = _read(data)
    assert [e[0] for e in read] == ["etc", "etc/inittab", "init", "dev/console"]
    assert stat.S_ISDIR(read[0][1])
    assert read[1][2] == b"::sysinit:/etc/rcS\n"
    assert stat.S_ISLNK(read[2][1])
    assert read[2][2] == b"/bin/busybox"
    assert stat.S_ISCHR(read[3][1])
    assert read[3][3:] == (5, 1)


@pytest.mark.parametrize("path", ["/etc/passwd", "etc/../../x"])
def test_paths_outside_the_archive_are_refused(path: str) -> None:
    with pytest.raises(ValueError, match="relative"):
        write_newc(io.BytesIO(), [CpioEntry.file(path, b"")])
