"""A connection to one launcher's `Cmd` service, found through the kubelet pods dir.

The socket is `<pods>/<pod uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock`,
walked without following symlinks (see safepath); the protocol version is negotiated
before any other call, and a launcher sharing no version with us is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from grpclib.client import Channel
from virt_rpc import CmdStub, PeerInfo, negotiate

from .podfiles import LAUNCHER_SOCKET, PodFiles, PodUid
from .safepath import PinnedDir

__all__ = ["BUILD_VERSION", "LauncherConnection", "connect_launcher"]

BUILD_VERSION = "0.1.0"


@dataclass
class LauncherConnection:
    """An open, negotiated channel to one launcher."""

    pod: PodUid
    channel: Channel
    cmd: CmdStub
    peer: PeerInfo
    _dir: PinnedDir

    def close(self) -> None:
        """Close the channel and release the pinned directory."""
        self.channel.close()
        with contextlib.suppress(OSError):
            self._dir.close()


async def connect_launcher(
    files: PodFiles, pod: PodUid, rpc_timeout: float = 30.0
) -> LauncherConnection:
    """Connect to the launcher of `pod` and negotiate the protocol version.

    Raises FileNotFoundError while the launcher is not ready (no launcher-sock yet),
    PathRefusedError for a symlink or non-socket, UnsupportedProtocolVersionError, or
    the gRPC/OS error of the handshake.
    """

    def _open() -> tuple[PinnedDir, str]:
        pinned = files.sockets_dir(pod)
        try:
            return pinned, pinned.socket(LAUNCHER_SOCKET)
        except BaseException:
            pinned.close()
            raise

    pinned, path = await asyncio.to_thread(_open)
    channel = Channel(path=path)
    try:
        peer = await negotiate(channel, "virt-handler", BUILD_VERSION)
    except BaseException:
        channel.close()
        pinned.close()
        raise
    return LauncherConnection(pod, channel, CmdStub(channel, timeout=rpc_timeout), peer, pinned)
