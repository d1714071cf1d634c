"""Fixtures for the launcher tier: a blocking-call detector, the libvirt test driver.

libvirt binds its event implementation to one loop per process, so every test
here runs on the session's loop (``loop_scope="session"``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from blockbuster import BlockBuster, blockbuster_ctx
from virt_launcher import BlockingExecutor, DomainManager, Host


@pytest.fixture(autouse=True)
def no_blocking_calls() -> Iterator[BlockBuster]:
    """Fail the test on any blocking call made on the event loop (blockbuster)."""
    with blockbuster_ctx() as detector:
        yield detector


@pytest.fixture(scope="session")
def executor() -> Iterator[BlockingExecutor]:
    """The blocking executor every libvirt call of the tests goes through."""
    pool = BlockingExecutor()
    yield pool
    pool.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def test_driver_manager(
    request: pytest.FixtureRequest, executor: BlockingExecutor
) -> AsyncIterator[DomainManager]:
    """A domain manager on libvirt's in-process test driver, for a domain unique to the test."""
    name = f"default_{request.node.name.replace('[', '-').replace(']', '')}"[:60]
    manager = DomainManager(Host("test:///default", executor), name, reboot_window=0.5)
    await manager.start()
    yield manager
    await manager.delete()
    await manager.stop()


@pytest.fixture
def domain_xml(test_driver_manager: DomainManager) -> str:
    """The smallest domain the test driver defines and starts, named for the manager."""
    return (
        f"<domain type='test'><name>{test_driver_manager.domain_name}</name>"
        "<memory unit='MiB'>64</memory><vcpu>1</vcpu>"
        "<os><type arch='x86_64'>hvm</type></os></domain>"
    )
