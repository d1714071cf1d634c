"""Reach files inside a launcher pod's volumes without following anything the pod planted.

The launcher's directories are writable by the guest's pod, so a path under them is
walked one component at a time with ``O_PATH | O_NOFOLLOW`` from a trusted root: a
symlink anywhere (or a `..`) is refused, never followed. The result is a short
``/proc/self/fd/N/<name>`` path, which also lifts the 107-byte unix socket limit that
the kubelet's deep pods dir would otherwise break; a socket in it is pinned itself
(virt_rpc.sockets), so one swapped for a symlink after the check is not followed.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from virt_rpc import PinnedPath, PinnedSocket, SocketPathError, pin_socket

__all__ = ["PathRefusedError", "PinnedDir", "check_component", "open_dir"]

_COMPONENT = re.compile(r"^[A-Za-z0-9_.~-]+$")


class PathRefusedError(Exception):
    """A path under a pod's volume is a symlink, escapes its root, or is malformed."""


def check_component(name: str, what: str = "path component") -> str:
    """Return ``name`` if it is one plain path component (no '/', not '.' or '..')."""
    if name in ("", ".", "..") or not _COMPONENT.match(name):
        raise PathRefusedError(f"{what} {name!r} is not a plain file name")
    return name


class PinnedDir(PinnedPath):
    """An open directory (an O_PATH descriptor) that stays where it was opened."""

    def child(self, name: str) -> str:
        """A path to `name` in this directory that resolves through the open descriptor."""
        check_component(name)
        return f"/proc/self/fd/{self.fd}/{name}"

    def socket(self, name: str) -> PinnedSocket:
        """The unix socket `name`, pinned; connect through its ``path``, then close it.

        Raises FileNotFoundError when it is not there, PathRefusedError for a symlink or
        a file that is not a socket.
        """
        check_component(name)
        try:
            return pin_socket(name, dir_fd=self.fd, display=f"{self.display}/{name}")
        except SocketPathError as error:
            raise PathRefusedError(str(error)) from None


def open_dir(root: Path, *components: str) -> PinnedDir:
    """Open `root`/`components...` as a PinnedDir, refusing symlinks below `root`.

    `root` itself is trusted (the kubelet's pods dir, configured by the operator); every
    component under it must be a real directory. Raises PathRefusedError for a symlink
    or a bad component, FileNotFoundError when something does not exist.
    """
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    fd = os.open(root, flags)
    shown = str(root)
    try:
        for name in components:
            check_component(name)
            shown = f"{shown}/{name}"
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise FileNotFoundError(f"{shown}: no such directory") from None
            if stat.S_ISLNK(st.st_mode):
                raise PathRefusedError(f"{shown} is a symlink; refusing to follow it")
            if not stat.S_ISDIR(st.st_mode):
                raise PathRefusedError(f"{shown} is not a directory")
            # O_NOFOLLOW closes the race between the lstat above and this open.
            child = os.open(name, flags | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return PinnedDir(fd, shown)
