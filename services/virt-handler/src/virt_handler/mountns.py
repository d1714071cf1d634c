"""Bind a file or directory from one container into another's mount namespace, or undo it.

Run as its own short-lived process (`python -m virt_handler.mountns`): entering a mount
namespace (setns CLONE_NEWNS) is refused to a process with more than one thread, and the
handler has several. It does what upstream's `virt-chroot --mount /proc/<pid>/ns/mnt mount
-o bind` does, with the kernel's new mount API instead of a mount binary:

- in the source's mount namespace, the source is looked up with openat2's RESOLVE_IN_ROOT |
  RESOLVE_NO_SYMLINKS, so a link in a claim's directory can never lead to a host file, and
  `open_tree(OPEN_TREE_CLONE)` makes a detached bind mount of it;
- the target (a file for a regular-file source, made O_EXCL | O_NOFOLLOW; a directory
  for a directory source, as a memory dump's claim is) is made in the target's namespace,
  under a directory whose links, such as the image's /var/run -> /run, resolve inside the
  target's root; the process enters that namespace and `move_mount` attaches the bind
  there. A target already showing the source's inode is left as it is.

`umount` detaches (MNT_DETACH | UMOUNT_NOFOLLOW) the target inside the target's namespace
and removes the file or the (then empty) directory. Prints one word on success (`mounted`, `present`, `unmounted`,
`absent`); a failure is a message on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import stat
import struct
import sys

__all__ = ["main"]

_LIBC = ctypes.CDLL(None, use_errno=True)
_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_SYS_OPENAT2 = 437
_OPEN_TREE_CLONE = 1
_OPEN_TREE_CLOEXEC = os.O_CLOEXEC
_AT_EMPTY_PATH = 0x1000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOVE_MOUNT_T_EMPTY_PATH = 0x40
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_IN_ROOT = 0x10
_CLONE_NEWNS = 0x00020000
_MNT_DETACH = 0x2
_UMOUNT_NOFOLLOW = 0x8
_O_PATH = 0o10000000


class MountError(Exception):
    """The bind could not be made or undone; the message says which step."""


def _fail(step: str) -> MountError:
    error = ctypes.get_errno()
    return MountError(f"{step}: {os.strerror(error)}")


def _root(pid: int) -> int:
    return os.open(f"/proc/{pid}/root", _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


def _resolve(root: int, path: str, flags: int, *, links: bool = False) -> int:
    """An fd for `path` under `root` (links, if allowed, resolve inside `root` too)."""
    resolve = _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS | (0 if links else _RESOLVE_NO_SYMLINKS)
    how = struct.pack("QQQ", flags | os.O_CLOEXEC, 0, resolve)
    buf = ctypes.create_string_buffer(how)
    fd = _LIBC.syscall(_SYS_OPENAT2, root, path.lstrip("/").encode(), buf, len(how))
    if fd < 0:
        raise _fail(f"open {path}")
    return int(fd)


def _namespace(pid: int) -> int:
    return os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)


def _enter(namespace: int, pid: int) -> None:
    try:
        if _LIBC.setns(namespace, _CLONE_NEWNS) != 0:
            raise _fail(f"setns /proc/{pid}/ns/mnt")
    finally:
        os.close(namespace)


def _make_target(directory: int, name: str, found: os.stat_result, uid: int) -> bool:
    """Make the mount point `name` (a file, or a directory for a directory source) under
    `directory`; False when it exists already showing the source (nothing to do)."""
    is_dir = stat.S_ISDIR(found.st_mode)
    try:
        if is_dir:
            os.mkdir(name, 0o770, dir_fd=directory)
            made = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=directory)
        else:
            made = os.open(
                name, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_WRONLY, 0o660, dir_fd=directory
            )
        os.fchown(made, uid, uid)
        os.close(made)
    except FileExistsError:
        existing = os.stat(name, dir_fd=directory, follow_symlinks=False)
        kind = stat.S_ISDIR if is_dir else stat.S_ISREG
        if not kind(existing.st_mode):
            what = "a directory" if is_dir else "a regular file"
            raise MountError(f"{name} exists and is not {what}") from None
        if (existing.st_dev, existing.st_ino) == (found.st_dev, found.st_ino):
            return False
    return True


def bind(source_pid: int, source: str, target_pid: int, target: str, uid: int) -> str:
    """Bind `source` (a regular file or a directory in source_pid's view) onto `target` in
    target_pid's.

    open_tree clones only a mount of the caller's own namespace, and move_mount attaches
    only into it: so the process enters the source's namespace to clone, then the target's
    to attach (both namespaces and the target's directory are opened first, while /proc
    is still the host's)."""
    source_ns, target_ns = _namespace(source_pid), _namespace(target_pid)
    # The launcher image's own links (/var/run -> /run) are followed, inside its root; the
    # claim's side, which the user's pods write, is never read through a link.
    directory = _resolve(_root(target_pid), os.path.dirname(target), os.O_DIRECTORY, links=True)
    _enter(source_ns, source_pid)
    source_fd = _resolve(os.open("/", _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), source, _O_PATH)
    found = os.fstat(source_fd)
    if not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode)):
        raise MountError(f"{source} is neither a regular file nor a directory")
    tree = _LIBC.syscall(
        _SYS_OPEN_TREE, source_fd, b"", _OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC | _AT_EMPTY_PATH
    )
    if tree < 0:
        raise _fail(f"open_tree {source}")
    name = os.path.basename(target)
    if not _make_target(directory, name, found, uid):
        return "present"
    target_fd = os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
    _enter(target_ns, target_pid)
    flags = _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH
    if _LIBC.syscall(_SYS_MOVE_MOUNT, tree, b"", target_fd, b"", flags) != 0:
        raise _fail(f"move_mount onto {target}")
    return "mounted"


def unbind(target_pid: int, target: str) -> str:
    """Detach whatever is mounted on `target` in target_pid's namespace; remove the file."""
    _enter(_namespace(target_pid), target_pid)
    gone = "absent"
    while _LIBC.umount2(target.encode(), _MNT_DETACH | _UMOUNT_NOFOLLOW) == 0:
        gone = "unmounted"
    error = ctypes.get_errno()
    if error not in (22, 2):  # EINVAL: not a mount point (any more); ENOENT: no file
        raise MountError(f"umount {target}: {os.strerror(error)}")
    with contextlib.suppress(FileNotFoundError):
        try:
            os.unlink(target)
        except IsADirectoryError:
            os.rmdir(target)  # a bound claim's directory: empty once unmounted
    return gone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m virt_handler.mountns")
    sub = parser.add_subparsers(dest="action", required=True)
    mount = sub.add_parser("mount")
    mount.add_argument("--source-pid", type=int, required=True)
    mount.add_argument("--source", required=True)
    mount.add_argument("--target-pid", type=int, required=True)
    mount.add_argument("--target", required=True)
    mount.add_argument("--uid", type=int, required=True)
    umount = sub.add_parser("umount")
    umount.add_argument("--target-pid", type=int, required=True)
    umount.add_argument("--target", required=True)
    args = parser.parse_args(argv)
    try:
        if args.action == "mount":
            print(bind(args.source_pid, args.source, args.target_pid, args.target, args.uid))
        else:
            print(unbind(args.target_pid, args.target))
    except (MountError, OSError) as error:
        print(str(error), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
