"""MemoryDump: a checked path in a memoryDump volume's directory, libvirt's memory-only raw
dump in the background, older dumps removed first, the result in Domain.memory_dump (on
the wire and in a Notify change); a repeated request does nothing."""

from __future__ import annotations

import asyncio
import datetime
import os
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import cast

import libvirt
import pytest
from grpclib import GRPCError
from grpclib.const import Status
from kubevirt_api.memorydump import DUMP_SUFFIX
from virt_launcher.cmd_server import CmdService, to_domain
from virt_launcher.domain_manager import DomainManager
from virt_launcher.executor import BlockingExecutor
from virt_launcher.guest import Guest
from virt_launcher.host import Host
from virt_launcher.identity import VmiIdentity, VmiUid
from virt_launcher.memory_dump import MemoryDumper
from virt_launcher.states import DomainChange
from virt_rpc import MemoryDumpRequest

NAME = "ns_vm"
FILE = f"vm-dump-20260102-030405{DUMP_SUFFIX}"
T0 = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)


class FakeDom:
    """libvirt's virDomain as Guest calls it; a dump writes the file (or fails)."""

    def __init__(self, active: bool = True) -> None:
        self.active = active
        self.dumps: list[tuple[str, int, int]] = []
        self.fail: str | None = None
        #: Cleared: a dump waits for it (a dump in progress).
        self.release = threading.Event()
        self.release.set()

    def name(self) -> str:
        return NAME

    def UUIDString(self) -> str:  # noqa: N802 - libvirt's name
        return "uuid-1"

    def isActive(self) -> int:  # noqa: N802
        return int(self.active)

    def state(self) -> tuple[int, int]:
        return (1, 1) if self.active else (5, 0)

    def coreDumpWithFormat(self, to: str, dumpformat: int, flags: int) -> int:  # noqa: N802
        self.dumps.append((to, dumpformat, flags))
        assert self.release.wait(10)
        if self.fail is not None:
            raise libvirt.libvirtError(self.fail)
        Path(to).write_bytes(b"ELF")
        return 0


class FakeHost:
    def __init__(self, guest: Guest | None) -> None:
        self.guest = guest

    async def lookup(self, name: str) -> Guest | None:
        return self.guest if name == NAME else None


class Clock:
    """Each reading is a second later than the one before."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        self.now += datetime.timedelta(seconds=1)
        return self.now


@pytest.fixture
def executor() -> Iterator[BlockingExecutor]:
    pool = BlockingExecutor(max_workers=2)
    yield pool
    pool.shutdown()


@pytest.fixture
def dom() -> FakeDom:
    return FakeDom()


@pytest.fixture
def hotplug(tmp_path: Path) -> Path:
    (tmp_path / "dump").mkdir()
    return tmp_path


@pytest.fixture
def manager(dom: FakeDom, executor: BlockingExecutor) -> DomainManager:
    return DomainManager(cast(Host, FakeHost(Guest(dom, executor))), NAME)


@pytest.fixture
async def dumper(manager: DomainManager, hotplug: Path) -> AsyncIterator[MemoryDumper]:
    dumps = MemoryDumper(manager, str(hotplug), clock=Clock())
    yield dumps
    await dumps.close()


def service(manager: DomainManager, dumps: MemoryDumper | None) -> CmdService:
    cmd = CmdService(
        VmiIdentity("ns", "vm", VmiUid("uid-1")),
        manager,
        lambda vmi, options: "<domain/>",
        default_grace_period=30,
        memory_dumps=dumps,
    )
    cmd.mark_ready()
    return cmd


async def refused(cmd: CmdService, path: str) -> GRPCError:
    with pytest.raises(GRPCError) as caught:
        await cmd.memory_dump(MemoryDumpRequest(dump_path=path))
    return caught.value


async def test_the_dump_runs_in_the_background_and_its_result_is_reported(
    manager: DomainManager, dumper: MemoryDumper, dom: FakeDom, hotplug: Path
) -> None:
    changes = manager.subscribe()
    cmd = service(manager, dumper)
    path = str(hotplug / "dump" / FILE)
    dom.release.clear()

    reply = await cmd.memory_dump(MemoryDumpRequest(dump_path=path))

    # Answered at once, while libvirt still dumps: started, not completed.
    assert reply.domain is not None
    started = reply.domain.memory_dump
    assert started is not None
    assert (started.file_name, started.start_timestamp) == (FILE, "2026-01-02T03:04:06Z")
    assert (started.completed, started.end_timestamp) == (False, "")
    dom.release.set()
    await dumper.wait()

    assert dom.dumps == [
        (path, libvirt.VIR_DOMAIN_CORE_DUMP_FORMAT_RAW, libvirt.VIR_DUMP_MEMORY_ONLY)
    ]
    assert await asyncio.to_thread(Path(path).read_bytes) == b"ELF"
    # Notify's watchers hear of the start and of the end.
    first, last = changes.get_nowait(), changes.get_nowait()
    assert isinstance(first, DomainChange)
    assert isinstance(last, DomainChange)
    assert first.status.memory_dump is not None
    assert not first.status.memory_dump.completed
    wire = to_domain(last.status).memory_dump
    assert wire is not None
    assert (wire.file_name, wire.completed, wire.failed, wire.failure_reason) == (
        FILE,
        True,
        False,
        "",
    )
    assert (wire.start_timestamp, wire.end_timestamp) == (
        "2026-01-02T03:04:06Z",
        "2026-01-02T03:04:07Z",
    )
    # And GetDomain-like reads carry it too.
    status = await manager.status()
    assert status is not None
    assert status.memory_dump is not None
    assert status.memory_dump.completed


async def test_asking_again_for_the_same_file_does_not_dump_twice(
    manager: DomainManager, dumper: MemoryDumper, dom: FakeDom, hotplug: Path
) -> None:
    path = str(hotplug / "dump" / FILE)
    dom.release.clear()
    await dumper.start(path)
    await dumper.start(path)  # in progress
    dom.release.set()
    await dumper.wait()
    await dumper.start(path)  # just done
    await dumper.wait()

    assert len(dom.dumps) == 1
    assert manager.memory_dump is not None
    assert manager.memory_dump.completed


async def test_a_second_dump_waits_for_the_first(
    manager: DomainManager, dumper: MemoryDumper, dom: FakeDom, hotplug: Path
) -> None:
    first = str(hotplug / "dump" / FILE)
    second = str(hotplug / "dump" / f"vm-dump-20260102-040000{DUMP_SUFFIX}")
    dom.release.clear()
    await dumper.start(first)
    await dumper.start(second)  # dropped: the record still names the running one
    assert manager.memory_dump is not None
    assert manager.memory_dump.file_name == FILE
    dom.release.set()
    await dumper.wait()

    await dumper.start(second)
    await dumper.wait()

    assert [to for to, _, _ in dom.dumps] == [first, second]
    assert manager.memory_dump.file_name == Path(second).name


async def test_older_dumps_are_removed_but_links_and_other_files_stay(
    dumper: MemoryDumper, hotplug: Path, tmp_path: Path
) -> None:
    directory = hotplug / "dump"
    (directory / f"vm-dump-20250101-000000{DUMP_SUFFIX}").write_bytes(b"old")
    (directory / "notes.txt").write_bytes(b"keep")
    outside = tmp_path / f"outside{DUMP_SUFFIX}"
    outside.write_bytes(b"not ours")
    (directory / f"link{DUMP_SUFFIX}").symlink_to(outside)
    (directory / f"sub{DUMP_SUFFIX}").mkdir()

    await dumper.start(str(directory / FILE))
    await dumper.wait()

    assert sorted(os.listdir(directory)) == sorted(
        [FILE, "notes.txt", f"link{DUMP_SUFFIX}", f"sub{DUMP_SUFFIX}"]
    )
    assert outside.read_bytes() == b"not ours"


async def test_a_failed_dump_is_recorded_with_libvirts_error(
    manager: DomainManager, dumper: MemoryDumper, dom: FakeDom, hotplug: Path
) -> None:
    dom.fail = "unable to write: No space left on device"

    await dumper.start(str(hotplug / "dump" / FILE))
    await dumper.wait()

    record = manager.memory_dump
    assert record is not None
    assert (record.completed, record.failed) == (True, True)
    assert record.failure_reason == (
        "Domain memory dump failed: unable to write: No space left on device"
    )
    assert record.end is not None
    # The change Notify sends carries it.
    assert manager.last_status is not None
    wire = to_domain(manager.last_status).memory_dump
    assert wire is not None
    assert (wire.failed, wire.end_timestamp) == (True, "2026-01-02T03:04:07Z")


async def test_no_running_domain_is_a_failed_precondition(
    executor: BlockingExecutor, hotplug: Path
) -> None:
    path = str(hotplug / "dump" / FILE)
    stopped = DomainManager(cast(Host, FakeHost(Guest(FakeDom(active=False), executor))), NAME)
    missing = DomainManager(cast(Host, FakeHost(None)), NAME)
    for manager, problem in ((stopped, "does not run"), (missing, "not defined")):
        error = await refused(service(manager, MemoryDumper(manager, str(hotplug))), path)
        assert error.status is Status.FAILED_PRECONDITION
        assert problem in str(error.message)
        assert manager.memory_dump is None


@pytest.mark.parametrize(
    ("relative", "problem"),
    [
        ("", "required"),
        ("dump/x" + DUMP_SUFFIX, "absolute"),
        ("{h}/dump/../dump/x" + DUMP_SUFFIX, "'..'"),
        ("{h}/dump/./x" + DUMP_SUFFIX, "normalised"),
        ("{h}//dump/x" + DUMP_SUFFIX, "normalised"),
        ("{h}/dump/x" + DUMP_SUFFIX + "/", "normalised"),
        ("{h}/x" + DUMP_SUFFIX, "<volume>/<file>"),
        ("{h}/dump/sub/x" + DUMP_SUFFIX, "<volume>/<file>"),
        ("/etc/dump/x" + DUMP_SUFFIX, "<volume>/<file>"),
        ("{h}/dump/x.img", f"end with {DUMP_SUFFIX}"),
        ("{h}/dump/" + DUMP_SUFFIX, f"end with {DUMP_SUFFIX}"),
        ("{h}/absent/x" + DUMP_SUFFIX, "does not exist"),
        ("{h}/link/x" + DUMP_SUFFIX, "not a directory"),
        ("{h}/file/x" + DUMP_SUFFIX, "not a directory"),
        ("{h}/dump/planted" + DUMP_SUFFIX, "not a regular file"),
    ],
)
async def test_a_bad_dump_path_is_refused_saying_why(
    manager: DomainManager,
    dumper: MemoryDumper,
    dom: FakeDom,
    hotplug: Path,
    tmp_path: Path,
    relative: str,
    problem: str,
) -> None:
    (hotplug / "link").symlink_to(hotplug / "dump")
    (hotplug / "file").write_bytes(b"")
    (hotplug / "dump" / f"planted{DUMP_SUFFIX}").symlink_to(tmp_path / "elsewhere")

    error = await refused(service(manager, dumper), relative.format(h=hotplug))

    assert error.status is Status.INVALID_ARGUMENT
    assert str(error.message).startswith("dump_path: ")
    assert problem in str(error.message)
    assert dom.dumps == []
    assert manager.memory_dump is None


async def test_a_launcher_without_dumps_says_so(manager: DomainManager, hotplug: Path) -> None:
    error = await refused(service(manager, None), str(hotplug / "dump" / FILE))
    assert error.status is Status.UNIMPLEMENTED


async def test_a_domain_that_never_dumped_reports_none(manager: DomainManager) -> None:
    status = await manager.status()
    assert status is not None
    assert to_domain(status).memory_dump is None
