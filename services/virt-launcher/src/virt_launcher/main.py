"""``virt-launcher``: one process per VMI, run as an unprivileged user in the VMI's pod.

Start-up: serve ``Cmd`` on ``<sockets dir>/launcher-init-sock`` (only Ping answers),
start a private libvirtd, connect, then rename the socket to ``launcher-sock``: its
presence tells virt-handler the launcher is ready. On SIGTERM the guest gets an ACPI
power-off and the grace period before it is destroyed; then everything stops.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grpclib.server import Server
from virt_rpc import HandshakeService, serve_unix

from virt_launcher.cmd_server import CmdService
from virt_launcher.conversion import DomainBuilder
from virt_launcher.domain_manager import DomainManager
from virt_launcher.errors import LibvirtError
from virt_launcher.events import drain_event_loop
from virt_launcher.executor import BlockingExecutor
from virt_launcher.host import Host
from virt_launcher.identity import VmiIdentity, VmiUid
from virt_launcher.libvirtd import Libvirtd, LibvirtdError, LibvirtdPaths
from virt_launcher.notify import NotifyPusher
from virt_launcher.states import DomainState

__all__ = ["INIT_SOCKET", "READY_SOCKET", "LauncherArgs", "main", "parse_args", "run"]

_log = logging.getLogger("virt_launcher")

INIT_SOCKET = "launcher-init-sock"
READY_SOCKET = "launcher-sock"
BUILD_VERSION = "0.1.0"


@dataclass(frozen=True)
class LauncherArgs:
    """The launcher's validated command line."""

    identity: VmiIdentity
    sockets_dir: Path
    private_dir: Path
    ephemeral_disk_dir: Path
    container_disk_dir: Path
    kernel_boot_dir: Path
    libvirt_dir: Path
    notify_socket: Path | None
    grace_period_seconds: int
    reboot_window_seconds: float
    libvirtd: str
    #: The uid:gid libvirtd (and so QEMU) runs as when the launcher itself is root.
    libvirtd_user: tuple[int, int] | None


class UsageError(Exception):
    """A command-line value is invalid; the message names the flag."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="virt-launcher", description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True, help="the VMI's name")
    p.add_argument("--namespace", required=True, help="the VMI's namespace")
    p.add_argument("--uid", required=True, help="the VMI's metadata.uid")
    p.add_argument("--sockets-dir", default="/var/run/kubevirt/sockets")
    p.add_argument("--private-dir", default="/var/run/kubevirt-private")
    p.add_argument("--ephemeral-disk-dir", default="/var/run/kubevirt-ephemeral-disks")
    p.add_argument("--container-disk-dir", default="/var/run/kubevirt/container-disks")
    p.add_argument(
        "--kernel-boot-dir",
        default="/var/run/kubevirt/kernel-boot",
        help="where the kernelBoot container's files are, at their paths inside the image",
    )
    p.add_argument(
        "--libvirt-dir",
        default="/var/run/libvirt",
        help="libvirtd's private dir; keep it short, QEMU's channel sockets go under it",
    )
    p.add_argument("--notify-socket", default=None, help="virt-handler's Notify socket")
    p.add_argument("--grace-period-seconds", type=int, default=30)
    p.add_argument("--reboot-window-seconds", type=float, default=2.0)
    p.add_argument("--libvirtd", default="/usr/sbin/libvirtd", help="the libvirtd binary")
    p.add_argument(
        "--libvirtd-user",
        default="107:107",
        help="UID:GID for libvirtd and QEMU when the launcher runs as root (never root)",
    )
    return p


def _absolute(flag: str, value: str) -> Path:
    path = Path(value)
    if not path.is_absolute() or ".." in path.parts:
        raise UsageError(f"{flag}: {value!r} must be an absolute path without '..'")
    return path


def _existing_dir(flag: str, path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise UsageError(f"{flag}: {path} does not exist") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{flag}: {path} must be a directory (symlinks are not followed)")


def parse_args(argv: Sequence[str]) -> LauncherArgs:
    """Parse and validate the command line; raises UsageError naming the flag."""
    ns = _parser().parse_args(argv)
    for flag, value in (("--name", ns.name), ("--namespace", ns.namespace), ("--uid", ns.uid)):
        if not value or "/" in value or value in (".", "..") or len(value) > 253:
            raise UsageError(f"{flag}: {value!r} must be a non-empty name without '/'")
    if ns.grace_period_seconds < 0:
        raise UsageError("--grace-period-seconds: must be 0 or more")
    if ns.reboot_window_seconds < 0:
        raise UsageError("--reboot-window-seconds: must be 0 or more")
    private_dir = _absolute("--private-dir", ns.private_dir)
    user: tuple[int, int] | None = None
    if os.geteuid() == 0:
        uid, _, gid = ns.libvirtd_user.partition(":")
        if not (uid.isdigit() and gid.isdigit()) or int(uid) == 0:
            raise UsageError(
                f"--libvirtd-user: {ns.libvirtd_user!r} must be UID:GID of an unprivileged "
                "user (libvirtd runs in session mode, never as root)"
            )
        user = (int(uid), int(gid))
    args = LauncherArgs(
        identity=VmiIdentity(ns.namespace, ns.name, VmiUid(ns.uid)),
        sockets_dir=_absolute("--sockets-dir", ns.sockets_dir),
        private_dir=private_dir,
        ephemeral_disk_dir=_absolute("--ephemeral-disk-dir", ns.ephemeral_disk_dir),
        container_disk_dir=_absolute("--container-disk-dir", ns.container_disk_dir),
        kernel_boot_dir=_absolute("--kernel-boot-dir", ns.kernel_boot_dir),
        libvirt_dir=_absolute("--libvirt-dir", ns.libvirt_dir),
        notify_socket=(
            None if ns.notify_socket is None else _absolute("--notify-socket", ns.notify_socket)
        ),
        grace_period_seconds=ns.grace_period_seconds,
        reboot_window_seconds=ns.reboot_window_seconds,
        libvirtd=ns.libvirtd,
        libvirtd_user=user,
    )
    for flag, path in (("--sockets-dir", args.sockets_dir), ("--private-dir", args.private_dir)):
        _existing_dir(flag, path)
    return args


def _prepare_private(args: LauncherArgs) -> None:
    # The serial console and VNC sockets live in <private>/<uid>; QEMU binds them there.
    for path in (args.private_dir / args.identity.uid, args.libvirt_dir):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if args.libvirtd_user is not None:
            os.chown(path, *args.libvirtd_user)


def _rename(src: Path, dst: Path) -> None:
    os.rename(src, dst)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)


async def run(args: LauncherArgs, builder: DomainBuilder) -> int:
    """Run the launcher until SIGTERM/SIGINT (0) or until libvirt is lost (1)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    await asyncio.to_thread(_prepare_private, args)
    executor = BlockingExecutor()
    host = Host(LibvirtdPaths(args.libvirt_dir).uri, executor)
    manager = DomainManager(host, args.identity.domain_name, args.reboot_window_seconds)
    cmd = CmdService(args.identity, manager, builder, args.grace_period_seconds)
    init_socket = args.sockets_dir / INIT_SOCKET
    ready_socket = args.sockets_dir / READY_SOCKET
    await asyncio.to_thread(_unlink, ready_socket)
    server: Server = await serve_unix(
        [cmd, HandshakeService("virt-launcher", BUILD_VERSION)], init_socket
    )
    libvirtd = Libvirtd(
        LibvirtdPaths(args.libvirt_dir), binary=args.libvirtd, user=args.libvirtd_user
    )
    pusher_task: asyncio.Task[None] | None = None
    pusher: NotifyPusher | None = None
    code = 0
    try:
        await libvirtd.start()
        _log.info("libvirtd %d serves %s", libvirtd.pid or 0, libvirtd.uri)
        if args.notify_socket is not None:
            # Subscribed before the manager starts, so no change can slip past it.
            pusher = NotifyPusher(args.notify_socket, args.identity, manager, BUILD_VERSION)
            pusher_task = asyncio.create_task(pusher.run(), name="notify")
        await manager.start()
        cmd.mark_ready()
        await asyncio.to_thread(_rename, init_socket, ready_socket)
        _log.info("ready: %s", ready_socket)

        waits = {
            asyncio.create_task(stop.wait(), name="signal"),
            asyncio.create_task(libvirtd.wait(), name="libvirtd"),
            asyncio.create_task(manager.connection_lost.wait(), name="connection"),
        }
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if not stop.is_set():
            _log.error("libvirt is gone (%s); exiting", ", ".join(t.get_name() for t in done))
            code = 1
        else:
            await _shut_down_guest(manager, args.grace_period_seconds)
        if pusher is not None:
            await pusher.drain(5.0)
    except LibvirtdError as exc:
        _log.error("%s", exc)
        code = 1
    finally:
        if pusher_task is not None:
            pusher_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pusher_task
        server.close()
        await server.wait_closed()
        for path in (init_socket, ready_socket):
            await asyncio.to_thread(_unlink, path)
        await manager.stop()
        # libvirt frees the closed connection's handles through callbacks on this loop:
        # let them run before the loop goes away.
        # Free the libvirt objects still referenced (their handles go away through
        # callbacks on this loop) while the loop runs, not during interpreter exit.
        gc.collect()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drain_event_loop(), 5)
        await libvirtd.stop()
        executor.shutdown()
    return code


async def _shut_down_guest(manager: DomainManager, grace_period: int) -> None:
    status = await manager.status()
    if status is None or status.state is DomainState.SHUTOFF:
        return
    try:
        if status.state is DomainState.PAUSED:
            _log.info("stopping: %s is paused and cannot power off; destroying it", status.name)
            await manager.kill()
        else:
            _log.info("stopping: ACPI power-off of %s, %ds grace period", status.name, grace_period)
            await manager.shutdown(grace_period)
    except LibvirtError as exc:
        _log.warning("stopping %s failed (%s); destroying it", status.name, exc)
        with contextlib.suppress(LibvirtError):
            await manager.kill()
    # The grace period's own timer destroys the domain; allow it time to report that.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(manager.wait_stopped(), grace_period + 15)
    final = await manager.status()
    _log.info("guest stopped: %s", "undefined" if final is None else final.state.name)


def _detect_blocking() -> bool:
    """Tests set VIRT_LAUNCHER_DETECT_BLOCKING=1: any blocking call on the loop then fails."""
    if os.environ.get("VIRT_LAUNCHER_DETECT_BLOCKING") != "1":
        return False
    from blockbuster import BlockBuster

    BlockBuster().activate()
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``virt-launcher`` command."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"virt-launcher: {exc}", file=sys.stderr)
        return 2
    from virt_launcher.converter import converter_builder

    builder = converter_builder(
        private_dir=str(args.private_dir),
        ephemeral_dir=str(args.ephemeral_disk_dir),
        container_disks_dir=str(args.container_disk_dir),
        kernel_boot_dir=str(args.kernel_boot_dir),
    )
    detecting = _detect_blocking()
    code = asyncio.run(run(args, builder))
    if detecting:
        # blockbuster patches methods of C types (forbiddenfruit) and the interpreter
        # crashes flushing buffered std streams at exit even after deactivation; all
        # work is done here, so leave without interpreter finalization.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
