"""A connection to one launcher's `Cmd` service, found through the kubelet pods dir.

The socket is `<pods>/<pod uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock`,
walked without following symlinks (see safepath) and pinned for the channel's life, so
a reconnect reaches the same socket or fails; the protocol version is negotiated before
any other call, and a launcher sharing no version with us is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from grpclib.client import Channel
from virt_rpc import CmdStub, PeerInfo, PinnedSocket, StrictProtoCodec, negotiate

from .podfiles import LAUNCHER_SOCKET, PodFiles, PodUid

__all__ = ["BUILD_VERSION", "LauncherConnection", "connect_launcher"]

BUILD_VERSION = "0.1.0"


@dataclass
class LauncherConnection:
    """An open, negotiated channel to one launcher."""

    pod: PodUid
    channel: Channel
    cmd: CmdStub
    peer: PeerInfo
    _socket: PinnedSocket

    def close(self) -> None:
        """Close the channel and release the pinned socket."""
        self.channel.close()
        with contextlib.suppress(OSError):
            self._socket.close()


async def connect_launcher(
    files: PodFiles, pod: PodUid, rpc_timeout: float = 30.0
) -> LauncherConnection:
    """Connect to the launcher of `pod` and negotiate the protocol version.

    Raises FileNotFoundError while the launcher is not ready (no launcher-sock yet),
    PathRefusedError for a symlink or non-socket, UnsupportedProtocolVersionError, or
    the gRPC/OS error of the handshake.
    """

    def _open() -> PinnedSocket:
        with files.sockets_dir(pod) as pinned:
            return pinned.socket(LAUNCHER_SOCKET)

    pinned = await asyncio.to_thread(_open)
    # The launcher may be compromised: its replies are decoded strictly too.
    channel = Channel(path=pinned.path, codec=StrictProtoCodec())
    try:
        peer = await negotiate(channel, "virt-handler", BUILD_VERSION)
    except BaseException:
        channel.close()
        pinned.close()
        raise
    return LauncherConnection(pod, channel, CmdStub(channel, timeout=rpc_timeout), peer, pinned)
