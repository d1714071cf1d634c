"""``virt-launcher``: one process per VMI, run as an unprivileged user in the VMI's pod.

Start-up: serve ``Cmd`` on ``<sockets dir>/launcher-init-sock`` (only Ping answers),
start a private libvirtd (or take over the one ``python -m virt_launcher`` started before
its imports, `virt_launcher.headstart`), connect, then rename the socket to
``launcher-sock``: its presence tells virt-handler the launcher is ready, and a hello on
the handler's Notify socket tells it at once (so it need not poll). libvirt's probe of
QEMU starts as early as it can (in the head start, else as soon as the connection is
open), so the first define waits only for what is left of it. On SIGTERM
the guest gets an ACPI power-off and the grace period before it is destroyed; then
everything stops (a second signal cuts the wait short). Flags, socket names and default directories are the
launcher-pod contract's (``virt_domain.launcher_pod``); logs and signals are service_kit's.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from grpclib.server import Server
from service_kit import (
    ServiceRunner,
    configure_logging,
    get_logger,
    level_for_verbosity,
    run_service,
)
from virt_domain.launcher_pod import INIT_SOCKET, LOG_VERBOSITY_ENV, READY_SOCKET
from virt_domain.layout import LauncherLayout
from virt_rpc import HandshakeService, SocketPathError, remove_stale_socket, serve_unix

from virt_launcher.agent import AgentPoller
from virt_launcher.args import LauncherArgs, UsageError, parse_args
from virt_launcher.cmd_server import CmdService
from virt_launcher.conversion import DomainBuilder
from virt_launcher.domain_manager import DomainManager
from virt_launcher.errors import LibvirtError
from virt_launcher.events import drain_event_loop
from virt_launcher.executor import BlockingExecutor
from virt_launcher.headstart import HeadStart
from virt_launcher.host import Host
from virt_launcher.libvirtd import Libvirtd, LibvirtdError, LibvirtdPaths
from virt_launcher.live_migration import LiveMigration
from virt_launcher.memory_dump import MemoryDumper
from virt_launcher.notify import NotifyPusher
from virt_launcher.states import DomainState

__all__ = ["LauncherArgs", "launcher_service", "main", "parse_args", "run"]

_log = get_logger("virt_launcher")

BUILD_VERSION = "0.1.0"
# After SIGTERM: the guest's own wait (grace period + 15 s), then the Notify drain,
# the libvirt event drain and libvirtd's stop; only then is the work cancelled.
_SHUTDOWN_MARGIN = 60.0


def _prepare_private(args: LauncherArgs) -> None:
    # The serial console and VNC sockets live in <private>/<uid>; QEMU binds them there.
    for path in (args.private_dir / args.identity.uid, args.libvirt_dir):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if args.libvirtd_user is not None:
            os.chown(path, *args.libvirtd_user)


def _rename(src: Path, dst: Path) -> None:
    os.rename(src, dst)


def _remove_socket(path: Path) -> None:
    # Only a socket of ours goes; anything else planted there is left alone (and logged).
    try:
        remove_stale_socket(path)
    except SocketPathError as exc:
        _log.warning("not removing it", error=str(exc))


async def run(
    args: LauncherArgs,
    builder: DomainBuilder,
    stop: asyncio.Event,
    target_builder: DomainBuilder | None = None,
    head_start: HeadStart | None = None,
) -> None:
    """Run the launcher until ``stop`` is set; return early only when libvirt is lost.

    ``target_builder`` prepares a migration target (default: ``builder``); ``head_start``
    is the libvirtd started for ``args`` before the loop ran, taken over rather than
    started again. Raises LibvirtdError when libvirtd cannot be started.
    """
    await asyncio.to_thread(_prepare_private, args)
    executor = BlockingExecutor()
    host = Host(LibvirtdPaths(args.libvirt_dir).uri, executor)
    manager = DomainManager(host, args.identity.domain_name, args.reboot_window_seconds)
    agent = AgentPoller(
        host, args.identity.domain_name, manager.republish, LauncherLayout.for_launcher(args.dirs)
    )
    migration = LiveMigration.create(
        manager,
        builder if target_builder is None else target_builder,
        str(args.ephemeral_disk_dir),
        qemu_owner=args.libvirtd_user,
    )
    memory_dumps = MemoryDumper(manager)
    cmd = CmdService(
        args.identity,
        manager,
        builder,
        args.grace_period_seconds,
        agent=agent,
        migration=migration,
        memory_dumps=memory_dumps,
    )
    init_socket = args.sockets_dir / INIT_SOCKET
    ready_socket = args.sockets_dir / READY_SOCKET
    await asyncio.to_thread(_remove_socket, ready_socket)
    server: Server = await serve_unix(
        [cmd, HandshakeService("virt-launcher", BUILD_VERSION)], init_socket
    )
    libvirtd = Libvirtd(
        LibvirtdPaths(args.libvirt_dir),
        binary=args.libvirtd,
        user=args.libvirtd_user,
        started=None if head_start is None else head_start.libvirtd,
    )
    pusher_task: asyncio.Task[None] | None = None
    pusher: NotifyPusher | None = None
    agent_tasks: list[asyncio.Task[None]] = []
    probe: asyncio.Task[None] | None = None
    try:
        await libvirtd.start()
        _log.info("libvirtd serves", pid=libvirtd.pid or 0, uri=libvirtd.uri)
        if args.notify_socket is not None:
            # Subscribed before the manager starts, so no change can slip past it.
            pusher = NotifyPusher(
                args.notify_socket, args.identity, manager, BUILD_VERSION, guest=lambda: agent.info
            )
            pusher_task = asyncio.create_task(pusher.run(), name="notify")
        agent_changes = manager.subscribe()
        await manager.start()
        probe = asyncio.create_task(_probe_emulator(host, head_start), name="emulator-probe")
        await host.watch_agents(agent.agent_changed)
        agent_tasks = [
            asyncio.create_task(agent.follow(agent_changes), name="agent-follow"),
            asyncio.create_task(agent.run(), name="agent-poll"),
        ]
        cmd.mark_ready()
        await asyncio.to_thread(_rename, init_socket, ready_socket)
        _log.info("ready", socket=str(ready_socket))
        if pusher is not None:
            await pusher.greet()

        waits = {
            asyncio.create_task(stop.wait(), name="signal"),
            asyncio.create_task(libvirtd.wait(), name="libvirtd"),
            asyncio.create_task(manager.connection_lost.wait(), name="connection"),
            asyncio.create_task(migration.source.departed.wait(), name="migrated"),
        }
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if migration.source.departed.is_set() and not stop.is_set():
            # The guest runs on the target now and its old domain is gone: done (exit 0).
            _log.info("the guest migrated away and its domain was deleted; exiting")
            stop.set()
        if not stop.is_set():
            _log.error("libvirt is gone; exiting", lost=[t.get_name() for t in done])
            return
        await _shut_down_guest(manager, args.grace_period_seconds)
        if pusher is not None:
            await pusher.drain(5.0)
    finally:
        background = [
            *agent_tasks,
            *(task for task in (pusher_task, probe) if task is not None),
        ]
        for started in background:
            started.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await started
        await agent.close()
        server.close()
        await server.wait_closed()
        cmd.close()
        await migration.close()
        await memory_dumps.close()
        for path in (init_socket, ready_socket):
            await asyncio.to_thread(_remove_socket, path)
        await manager.stop()
        # Free the libvirt objects still referenced (their handles go away through
        # callbacks on this loop) while the loop runs, not during interpreter exit.
        gc.collect()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drain_event_loop(), 5)
        await libvirtd.stop()
        executor.shutdown()


# How long the probe's log line waits for the head start's own account of it.
_HEAD_START_REPORT_WAIT = 5.0


async def _probe_emulator(host: Host, head_start: HeadStart | None) -> None:
    started = time.monotonic()
    try:
        # After the head start's probe this only reads libvirt's cache (or waits for
        # the probe still under way there).
        await host.probe_emulator()
    except LibvirtError as exc:
        # Only a head start: the define that needs the emulator reports its failure.
        _log.warning("emulator probe failed", error=str(exc))
        return
    early = None
    if head_start is not None and (
        # The head start asked libvirtd for the same probe; on a busy node its thread can
        # learn of the answer a little after this loop does.
        head_start.probed.is_set()
        or await asyncio.to_thread(head_start.probed.wait, _HEAD_START_REPORT_WAIT)
    ):
        early = head_start.outcome
    _log.info(
        "emulator probed",
        seconds=round(time.monotonic() - started, 3),
        head_start=None if early is None or early.seconds is None else round(early.seconds, 3),
        head_start_error=None if early is None else early.error,
    )


def launcher_service(
    args: LauncherArgs,
    builder: DomainBuilder,
    target_builder: DomainBuilder | None = None,
    head_start: HeadStart | None = None,
) -> ServiceRunner:
    """The launcher as a service_kit service: no listener, one background task.

    Exit code 0 after SIGTERM/SIGINT, 1 when libvirt is lost or libvirtd cannot start.
    """

    async def launcher(stop: asyncio.Event) -> None:
        try:
            await run(args, builder, stop, target_builder, head_start)
        except LibvirtdError as exc:
            # Its message carries libvirtd's log tail; a traceback would add nothing.
            _log.error("libvirtd failed", error=str(exc))

    return ServiceRunner(
        None,
        [],
        background={"launcher": launcher},
        shutdown_timeout=args.grace_period_seconds + _SHUTDOWN_MARGIN,
    )


async def _shut_down_guest(manager: DomainManager, grace_period: int) -> None:
    status = await manager.status()
    if status is None or status.state is DomainState.SHUTOFF:
        return
    # Whoever stopped the pod, the guest did not ask to stop: the handler decides from
    # this (and the VMI's deletion) whether the VMI succeeded or failed.
    manager.pod_stopping = True
    try:
        if status.state is DomainState.PAUSED:
            _log.info("stopping: paused, cannot power off; destroying it", domain=status.name)
            await manager.kill()
        else:
            _log.info("stopping: ACPI power-off", domain=status.name, grace_period=grace_period)
            await manager.shutdown(grace_period)
    except LibvirtError as exc:
        _log.warning("stopping failed; destroying it", domain=status.name, error=str(exc))
        with contextlib.suppress(LibvirtError):
            await manager.kill()
    # The grace period's own timer destroys the domain; allow it time to report that.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(manager.wait_stopped(), grace_period + 15)
    final = await manager.status()
    _log.info("guest stopped", state="undefined" if final is None else final.state.name)


def _log_level(verbosity: str | None) -> int | str:
    """The level for the KubeVirt CR's virtLauncher verbosity (the controller's env var)."""
    if verbosity is None or not verbosity.isdigit() or int(verbosity) > 9:
        return "info"
    return level_for_verbosity(int(verbosity))


def _detect_blocking() -> bool:
    """Tests set VIRT_LAUNCHER_DETECT_BLOCKING=1: any blocking call on the loop then fails."""
    if os.environ.get("VIRT_LAUNCHER_DETECT_BLOCKING") != "1":
        return False
    from blockbuster import BlockBuster

    BlockBuster().activate()
    return True


def main(argv: Sequence[str] | None = None, head_start: HeadStart | None = None) -> int:
    """Entry point of the ``virt-launcher`` command; ``head_start``: the libvirtd
    `begin_head_start` started for the same ``argv``."""
    configure_logging(_log_level(os.environ.get(LOG_VERBOSITY_ENV)), component="virt-launcher")
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"virt-launcher: {exc}", file=sys.stderr)
        return 2
    from virt_launcher.converter import converter_builder, converter_target_builder

    service = launcher_service(
        args, converter_builder(args.dirs), converter_target_builder(args.dirs), head_start
    )
    detecting = _detect_blocking()
    code = run_service(service)
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
