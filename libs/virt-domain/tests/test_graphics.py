"""VNC on a unix socket and the video device."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from virt_domain import ConversionError, Domain, LauncherLayout

Converter = Callable[..., Domain]


def test_vnc_socket_and_vga(to_domain: Converter) -> None:
    domain = to_domain(layout=LauncherLayout(private_dir="/p"))
    (graphics,) = domain.devices.graphics
    assert graphics.listen is not None
    assert (graphics.type, graphics.listen.type, graphics.listen.socket) == (
        "vnc",
        "socket",
        "/p/0b5e5a6c-uid/virt-vnc",
    )
    (video,) = domain.devices.videos
    assert (video.model.type, video.model.heads, video.model.vram) == ("vga", 1, 16384)


def test_efi_guests_get_bochs(to_domain: Converter) -> None:
    video = to_domain({"firmware": {"bootloader": {"efi": {"secureBoot": False}}}}).devices.videos[
        0
    ]
    assert video.model.type == "bochs"


def test_explicit_video_type(to_domain: Converter) -> None:
    assert (
        to_domain({"devices": {"video": {"type": "virtio"}}}).devices.videos[0].model.type
        == "virtio"
    )
    with pytest.raises(ConversionError) as info:
        to_domain({"devices": {"video": {"type": "3dfx"}}})
    assert info.value.field == "spec.domain.devices.video.type"


def test_no_graphics_when_autoattach_is_off(to_domain: Converter) -> None:
    domain = to_domain({"devices": {"autoattachGraphicsDevice": False}})
    assert (domain.devices.graphics, domain.devices.videos) == ([], [])
