"""VNC on a unix socket, and the video device behind it."""

from __future__ import annotations

from ..devices import Graphics, GraphicsListen, Video, VideoModel
from ..errors import ConversionError
from ..schema import Domain
from .context import Context
from .firmware import uses_efi

__all__ = ["configure"]

_VIDEO_TYPES = ("vga", "cirrus", "virtio", "bochs", "ramfb")


def configure(ctx: Context, domain: Domain) -> None:
    """Add VNC (socket ``layout.vnc_socket(uid)``) and a video device, unless disabled."""
    if ctx.devices.autoattach_graphics_device is False:
        return
    domain.devices.graphics.append(
        Graphics(
            type="vnc", listen=GraphicsListen(type="socket", socket=ctx.layout.vnc_socket(ctx.uid))
        )
    )
    wanted = ctx.devices.video.type if ctx.devices.video is not None else None
    if wanted:
        if wanted not in _VIDEO_TYPES:
            raise ConversionError(
                "spec.domain.devices.video.type",
                f"unsupported video type {wanted!r}; valid: {', '.join(_VIDEO_TYPES)}",
            )
        model = VideoModel(type=wanted, heads=1, vram=16384)
    elif uses_efi(ctx):
        # EFI guests get a linear framebuffer they can drive without a VGA BIOS.
        model = VideoModel(type="bochs", heads=1)
    else:
        model = VideoModel(type="vga", heads=1, vram=16384)
    domain.devices.videos.append(Video(model=model))
