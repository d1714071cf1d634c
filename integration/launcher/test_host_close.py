"""A closed Host leaves nothing of its connection on the event loop.

A connection whose handles (its socket, its keepalive timer) stayed registered kept the
launcher from exiting until its event drain timed out, 5 s after every guest stopped.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import libvirtaio
import pytest
import pytest_asyncio
from virt_launcher.events import drain_event_loop
from virt_launcher.executor import BlockingExecutor
from virt_launcher.host import Host
from virt_launcher.libvirtd import Libvirtd, LibvirtdPaths

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def _private_dir(owner: tuple[int, int] | None) -> Path:
    # Short: libvirtd's socket path must fit in a unix socket address.
    root = Path(tempfile.mkdtemp(prefix="kvh-", dir="/tmp"))
    if owner is not None:
        os.chown(root, *owner)
    return root


@pytest_asyncio.fixture(loop_scope="session")
async def libvirtd(launcher_user: tuple[int, int] | None) -> AsyncIterator[Libvirtd]:
    root = await asyncio.to_thread(_private_dir, launcher_user)
    daemon = Libvirtd(LibvirtdPaths(root), user=launcher_user)
    await daemon.start()
    yield daemon
    await daemon.stop()
    await asyncio.to_thread(shutil.rmtree, root, True)


async def test_closing_unregisters_the_connections_socket_and_timers(
    libvirtd: Libvirtd, executor: BlockingExecutor
) -> None:
    host = Host(libvirtd.uri, executor)
    closed: list[str] = []
    await host.connect(lambda _event: None, closed.append)
    await host.watch_agents(lambda _name, _connected: None)
    impl = libvirtaio.getCurrentImpl()
    assert impl is not None
    assert impl.callbacks, "an open connection registers its socket and keepalive timer"

    await host.close()
    try:
        await asyncio.wait_for(drain_event_loop(), 30)
    except TimeoutError:
        pytest.fail(f"the loop never drained; left on it after close(): {impl.callbacks}")

    assert impl.is_idle(), f"left on the loop after close(): {impl.callbacks}"
    assert closed == [], "close() is ours: the close callback must not report it as lost"
