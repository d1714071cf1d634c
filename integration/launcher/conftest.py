"""Fixtures for the launcher tier.

- a blocking-call detector (blockbuster) active in every test;
- a domain manager on libvirt's in-process test driver;
- for the process-level tests: the tiny guest (kernel + busybox initramfs), a
  virt-launcher process with its sockets dir, and a recording Notify server that
  plays virt-handler.

libvirt binds its event implementation to one loop per process, so every test
here runs on the session's loop (``loop_scope="session"``). When the tests run as
root, libvirtd and QEMU run as uid 107 (created as ``kubevirt-qemu`` if no account
has that uid), like upstream's launcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from blockbuster import BlockBuster, blockbuster_ctx
from grpclib.client import Channel
from grpclib.server import Server
from virt_launcher import BlockingExecutor, DomainManager, Host
from virt_rpc import (
    CmdStub,
    DomainEvent,
    HandshakeService,
    KubernetesEvent,
    NotifyBase,
    NotifyResponse,
    VmiRef,
    negotiate,
    open_channel,
    serve_unix,
)

LAUNCHER_UID = 107
GUEST_CACHE = Path.home() / ".cache" / "kubevirt-py" / "guest"


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
    manager = DomainManager(Host("test:///default", executor), name, reboot_window=2.0)
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


# -- the tiny guest ------------------------------------------------------------------


@dataclass(frozen=True)
class TinyGuest:
    """A kernel and initramfs that print ``marker`` on ttyS0 and power off on ACPI."""

    vmlinuz: Path
    initrd: Path
    marker: str


GUEST_MARKER = "KUBEVIRT-PY-GUEST-READY"
GUEST_POWEROFF_MARKER = "KUBEVIRT-PY-GUEST-POWEROFF"
#: With the kernel argument GUEST_TICK_ARG the guest prints "GUEST_TICK <uptime> <idle>"
#: every second: a guest that keeps running shows its uptime growing.
GUEST_TICK_ARG = "kvpy.tick"
GUEST_TICK = "KUBEVIRT-PY-GUEST-UPTIME"
# /init of the tiny guest: print the marker, power off when the ACPI button is pressed.
GUEST_INIT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
insmod /lib/modules/evdev.ko
insmod /lib/modules/button.ko
for ev in /sys/class/input/event*; do
    grep -q "Power Button" "$ev/device/name" 2>/dev/null && button="/dev/input/${{ev##*/}}"
done
if [ -n "$button" ]; then
    # Open the button before the marker: a press is queued from then on, never lost.
    exec 3<"$button"
    (head -c 1 <&3 >/dev/null; echo {GUEST_POWEROFF_MARKER} >/dev/ttyS0; poweroff -f) &
fi
echo {GUEST_MARKER} >/dev/ttyS0
if grep -q {GUEST_TICK_ARG} /proc/cmdline; then
    # Asked for (kernel argument): the guest's uptime on the console every second.
    while true; do echo "{GUEST_TICK} $(cat /proc/uptime)" >/dev/ttyS0; sleep 1; done &
fi
while true; do sleep 3600; done
"""
GUEST_MODULES = ("kernel/drivers/input/evdev.ko", "kernel/drivers/acpi/button.ko")


@pytest.fixture(scope="session")
def tiny_guest() -> TinyGuest:
    """The Debian cloud kernel and a busybox initramfs, cached under ~/.cache/kubevirt-py/guest.

    /init prints GUEST_MARKER on ttyS0 and powers the guest off on the ACPI power
    button. (Until tools/images ships its guest; then this fixture should use it.)
    """
    kernels = sorted(Path("/boot").glob("vmlinuz-*-cloud-amd64"))
    if not kernels:
        pytest.fail("no /boot/vmlinuz-*-cloud-amd64: apt-get install linux-image-cloud-amd64")
    kernel = kernels[-1]
    release = kernel.name.removeprefix("vmlinuz-")
    busybox = Path("/bin/busybox")
    recipe = hashlib.sha256(GUEST_INIT.encode() + busybox.read_bytes()).hexdigest()[:12]
    cache = GUEST_CACHE / f"{release}-{recipe}"
    vmlinuz, initrd = cache / "vmlinuz", cache / "initrd.img"
    if not initrd.exists():
        cache.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kernel, vmlinuz)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for d in ("bin", "dev", "proc", "sys", "lib/modules"):
                (root / d).mkdir(parents=True)
            shutil.copyfile(busybox, root / "bin/busybox")
            (root / "bin/busybox").chmod(0o755)
            (root / "init").write_text(GUEST_INIT)
            (root / "init").chmod(0o755)
            for module in GUEST_MODULES:
                source = Path("/lib/modules") / release / module
                shutil.copyfile(source, root / "lib/modules" / source.name)
            names = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
            archive = subprocess.run(
                ["cpio", "--quiet", "-o", "-H", "newc", "--owner=0:0"],
                cwd=root,
                input="\n".join(names).encode(),
                capture_output=True,
                check=True,
            ).stdout
        partial = initrd.with_suffix(".partial")
        partial.write_bytes(gzip.compress(archive, mtime=0))
        partial.replace(initrd)
    return TinyGuest(vmlinuz=vmlinuz, initrd=initrd, marker=GUEST_MARKER)


@pytest.fixture(scope="session")
def agent_guest(tmp_path_factory: pytest.TempPathFactory) -> TinyGuest:
    """kv-images' tiny guest (busybox init, qemu-ga on its virtio-serial port), built for
    kernel boot: the same initramfs the containerDisk and kernelBoot images carry."""
    from kv_images import find_guest_kernel
    from kv_images.guest import GUEST_MARKER as READY
    from kv_images.guest import build_initramfs

    kernel = find_guest_kernel()
    cache = tmp_path_factory.mktemp("agent-guest")
    shutil.copyfile(kernel.vmlinuz, cache / "vmlinuz")
    build_initramfs(kernel, cache / "initrd.img")
    return TinyGuest(vmlinuz=cache / "vmlinuz", initrd=cache / "initrd.img", marker=READY)


# -- the launcher process ------------------------------------------------------------


@pytest.fixture(scope="session")
def launcher_user() -> tuple[int, int] | None:
    """uid:gid for libvirtd and QEMU when the tests run as root (else None: our own)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwuid(LAUNCHER_UID)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--uid", str(LAUNCHER_UID), "--user-group",
             "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
             "kubevirt-qemu"],
            check=True,
        )  # fmt: skip
        entry = pwd.getpwuid(LAUNCHER_UID)
    return entry.pw_uid, entry.pw_gid


class NotifyRecorder(NotifyBase):
    """Plays virt-handler's Notify side: records every event in arrival order."""

    def __init__(self) -> None:
        self.items: asyncio.Queue[DomainEvent | KubernetesEvent] = asyncio.Queue()

    async def handle_domain_event(self, message: DomainEvent) -> NotifyResponse:
        self.items.put_nowait(message)
        return NotifyResponse()

    async def handle_kubernetes_event(self, message: KubernetesEvent) -> NotifyResponse:
        self.items.put_nowait(message)
        return NotifyResponse()

    def forget(self) -> None:
        """Drop everything received so far."""
        while not self.items.empty():
            self.items.get_nowait()

    async def expect(
        self,
        matches: Callable[[DomainEvent | KubernetesEvent], bool],
        within: float = 60.0,
    ) -> tuple[DomainEvent | KubernetesEvent, list[DomainEvent | KubernetesEvent]]:
        """The first item that ``matches`` and every item before it; fails after ``within``."""
        skipped: list[DomainEvent | KubernetesEvent] = []
        deadline = time.monotonic() + within
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no matching Notify event within {within}s; got {skipped}")
            try:
                item = await asyncio.wait_for(self.items.get(), remaining)
            except TimeoutError:
                continue
            if matches(item):
                return item, skipped
            skipped.append(item)


@dataclass
class Launcher:
    """A running virt-launcher process, the Notify recorder, and a Cmd client."""

    process: asyncio.subprocess.Process
    base: Path
    sockets_dir: Path
    private_dir: Path
    kernel_boot_dir: Path
    uid: str
    ref: VmiRef
    notify: NotifyRecorder
    channel: Channel
    cmd: CmdStub
    log: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def serial_socket(self) -> Path:
        """The guest's serial console socket (the converter's layout)."""
        return self.private_dir / self.uid / "virt-serial0"

    def vmi(self, **spec: Any) -> dict[str, Any]:
        """A kernelBoot VMI of the tiny guest for this launcher."""
        body: dict[str, Any] = {
            "terminationGracePeriodSeconds": 30,
            "domain": {
                "firmware": {
                    "kernelBoot": {
                        "kernelArgs": "console=ttyS0 panic=-1",
                        "container": {
                            "image": "localhost/kubevirt-py/tiny-guest:latest",
                            "kernelPath": "/boot/vmlinuz",
                            "initrdPath": "/boot/initrd.img",
                        },
                    }
                },
                "devices": {"autoattachPodInterface": False, "autoattachMemBalloon": False},
                "resources": {"requests": {"memory": "128Mi"}},
            },
        }
        body.update(spec)
        return {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": self.ref.name, "namespace": self.ref.namespace, "uid": self.uid},
            "spec": body,
        }

    def vmi_with_keys(self, secret: str, propagation: dict[str, Any]) -> dict[str, Any]:
        """:meth:`vmi` with a cloud-init disk (virtio) and an SSH access credential from
        ``secret`` propagated by ``propagation`` (``{"noCloud": {}}``, ``{"qemuGuestAgent": …}``)."""
        body = self.vmi()
        spec = body["spec"]
        spec["domain"]["devices"]["disks"] = [{"name": "cloudinit", "disk": {"bus": "virtio"}}]
        spec["volumes"] = [
            {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config\nhostname: t\n"}}
        ]
        spec["accessCredentials"] = [
            {
                "sshPublicKey": {
                    "source": {"secret": {"secretName": secret}},
                    "propagationMethod": propagation,
                }
            }
        ]
        return body

    def mount_access_secret(self, secret: str, files: dict[str, str]) -> None:
        """Lay out ``secret`` as kubelet mounts the controller's access credential volume
        (atomic-writer: a timestamped dir, ``..data``, one symlink per key). Blocking."""
        volume = self.private_dir / "secret" / f"{secret}-access-cred"
        stamp = volume / "..2026_08_22_10_00_00.000000001"
        stamp.mkdir(parents=True)
        for key, text in files.items():
            (stamp / key).write_text(text)
            (volume / key).symlink_to(f"..data/{key}")
        (volume / "..data").symlink_to(stamp.name)

    def vmi_json(self, **spec: Any) -> str:
        """:meth:`vmi` as JSON."""
        return json.dumps(self.vmi(**spec))


def _socket_exists(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _make_dirs(tiny_guest: TinyGuest, pod_paths: bool = False) -> Path:
    """A launcher's base dir with its directories (laid out as POD_MOUNTS binds them
    with ``pod_paths``) and the tiny guest's kernelBoot files."""
    # Short paths: unix socket paths must fit in 107 bytes.
    base = Path(tempfile.mkdtemp(prefix="kvp-" if pod_paths else "kvl-", dir="/tmp"))
    base.chmod(0o755)
    public = "public/" if pod_paths else ""
    subs = ["private", "ephemeral", "handler", *(f"{public}{d}" for d in _PUBLIC_DIRS)]
    if pod_paths:
        subs.append("lv")
    for sub in subs:
        (base / sub).mkdir(parents=True)
        (base / sub).chmod(0o755)
    shutil.copyfile(tiny_guest.vmlinuz, base / f"{public}kernel-boot/boot/vmlinuz")
    shutil.copyfile(tiny_guest.initrd, base / f"{public}kernel-boot/boot/initrd.img")
    return base


_PUBLIC_DIRS = ("sockets", "container-disks", "kernel-boot/boot")


#: The launcher pod's directories (virt_domain.launcher_pod's mount paths), each bound from
#: the launcher's base dir in a mount namespace of its own: every launcher sees them at
#: the same paths, as in its pod, which live migration needs (the domain XML names them).
POD_MOUNTS = {
    "public": "/var/run/kubevirt",
    "private": "/var/run/kubevirt-private",
    "ephemeral": "/var/run/kubevirt-ephemeral-disks",
    "lv": "/var/run/libvirt",
}


def _make_pod_dirs(tiny_guest: TinyGuest, owner: tuple[int, int]) -> Path:
    base = _make_dirs(tiny_guest, pod_paths=True)
    for sub in POD_MOUNTS:
        _chown_tree(base / sub, owner)
    for mount_point in POD_MOUNTS.values():
        Path(mount_point).mkdir(parents=True, exist_ok=True)  # empty, on the host
    return base


def _in_pod_mounts(base: Path, run_as: tuple[int, int], argv: list[str]) -> list[str]:
    """``argv`` in a new mount namespace with POD_MOUNTS bound, as ``run_as``."""
    binds = "; ".join(f"mount --bind {base / sub} {point}" for sub, point in POD_MOUNTS.items())
    script = f"set -e; {binds}; exec setpriv --reuid={run_as[0]} --regid={run_as[1]} " + (
        '--clear-groups -- "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]


def _mount_namespace(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino
    except OSError:
        return None


def _kill_namespace(namespace: int) -> list[str]:
    """SIGKILL every process in mount namespace ``namespace`` (a pod-paths launcher's)."""
    killed = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        if _mount_namespace(int(pid)) != namespace:
            continue
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
            os.kill(int(pid), signal.SIGKILL)
            killed.append(name)
    return killed


def _unprivileged_python() -> list[str]:
    """A python the launcher's user can execute, with this venv's packages.

    The venv's interpreter may live under a home directory other users cannot enter
    (pyenv under /root), so the system python of the same minor version is used.
    """
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists():
        pytest.skip(f"{system} is needed to run the launcher as an unprivileged user")
    site_dir = next(p for p in sys.path if p.endswith("site-packages"))
    bootstrap = (
        f"import runpy, site; site.addsitedir({site_dir!r}); "
        "runpy.run_module('virt_launcher', run_name='__main__')"
    )
    return [str(system), "-c", bootstrap]


def _chown_tree(base: Path, owner: tuple[int, int]) -> None:
    for path in [base, *base.rglob("*")]:
        os.chown(path, *owner)


async def start_launcher(
    tiny_guest: TinyGuest,
    user: tuple[int, int] | None,
    grace_period: int = 30,
    run_as: tuple[int, int] | None = None,
    pod_paths: bool = False,
    uid: str | None = None,
) -> Launcher:
    """Start virt-launcher as a process (blocking-call detection on) and connect to it.

    With ``run_as`` the launcher process itself runs as that uid:gid (as in its image),
    otherwise as we do, handing libvirtd to ``user`` when we are root. With
    ``pod_paths`` (root only) it runs as ``run_as`` in a mount namespace of its own where
    its directories are the pod's (POD_MOUNTS), with its default flags. ``uid``: the
    VMI's uid (default: a new one).
    """
    if pod_paths:
        assert run_as is not None
        base = await asyncio.to_thread(_make_pod_dirs, tiny_guest, run_as)
    else:
        base = await asyncio.to_thread(_make_dirs, tiny_guest)
    notify = NotifyRecorder()
    notify_socket = base / "handler" / "notify.sock"
    server = await serve_unix(
        [notify, HandshakeService("virt-handler", "test")], notify_socket, mode=0o666
    )
    uid = str(uuid.uuid4()) if uid is None else uid
    log = base / "launcher.log"
    python = [sys.executable, "-m", "virt_launcher"]
    if run_as is not None:
        python = await asyncio.to_thread(_unprivileged_python)
    argv = [
        *python,
        "--name", "tiny", "--namespace", "default", "--uid", uid,
        "--sockets-dir", str(base / "sockets"),
        "--private-dir", str(base / "private"),
        "--ephemeral-disk-dir", str(base / "ephemeral"),
        "--container-disk-dir", str(base / "container-disks"),
        "--kernel-boot-dir", str(base / "kernel-boot"),
        "--libvirt-dir", str(base / "lv"),
        "--notify-socket", str(notify_socket),
        "--grace-period-seconds", str(grace_period),
    ]  # fmt: skip
    if pod_paths:
        argv = [
            *python,
            "--name", "tiny", "--namespace", "default", "--uid", uid,
            "--notify-socket", str(notify_socket),
            "--grace-period-seconds", str(grace_period),
        ]  # fmt: skip
    if user is not None and run_as is None:
        argv += ["--libvirtd-user", f"{user[0]}:{user[1]}"]
    env = dict(os.environ, VIRT_LAUNCHER_DETECT_BLOCKING="1", PYTHONFAULTHANDLER="1")
    log_file = await asyncio.to_thread(log.open, "wb")
    identity: dict[str, Any] = {}
    if run_as is not None and not pod_paths:
        # The pod gives the launcher an emptyDir for libvirt; here it is made for it.
        await asyncio.to_thread((base / "lv").mkdir)
        await asyncio.to_thread(_chown_tree, base / "lv", run_as)
        await asyncio.to_thread(_chown_tree, base / "sockets", run_as)
        await asyncio.to_thread(_chown_tree, base / "private", run_as)
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "VIRT_LAUNCHER_DETECT_BLOCKING": "1",
            "PYTHONFAULTHANDLER": "1",
        }
        identity = {"user": run_as[0], "group": run_as[1], "extra_groups": []}
    if pod_paths:
        assert run_as is not None
        argv = _in_pod_mounts(base, run_as, argv)
        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "VIRT_LAUNCHER_DETECT_BLOCKING": "1",
            "PYTHONFAULTHANDLER": "1",
        }
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            env=env,
            cwd=str(base),
            **identity,
        )
    finally:
        await asyncio.to_thread(log_file.close)
    sockets_dir = base / "public" / "sockets" if pod_paths else base / "sockets"
    ready = sockets_dir / "launcher-sock"
    deadline = time.monotonic() + 90
    while not await asyncio.to_thread(_socket_exists, ready):
        if process.returncode is not None or time.monotonic() > deadline:
            text = await asyncio.to_thread(log.read_text)
            pytest.fail(f"virt-launcher did not become ready:\n{text}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 0.1)
    channel = await open_channel(ready)
    await negotiate(channel, "virt-handler", "test")
    launcher = Launcher(
        process=process,
        base=base,
        sockets_dir=sockets_dir,
        private_dir=base / "private",
        kernel_boot_dir=base / "public" / "kernel-boot" if pod_paths else base / "kernel-boot",
        uid=uid,
        ref=VmiRef(namespace="default", name="tiny", uid=uid),
        notify=notify,
        channel=channel,
        cmd=CmdStub(channel, timeout=120),
        log=log,
    )
    launcher.extra["notify_server"] = server
    if pod_paths:
        launcher.extra["mount_namespace"] = await asyncio.to_thread(_mount_namespace, process.pid)
    return launcher


def _kill_leftovers(base: Path) -> list[str]:
    """SIGKILL processes that still refer to ``base`` (a crashed launcher's QEMU, virtlogd)."""
    killed = []
    marker = str(base).encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            text = Path(f"/proc/{pid}/cmdline").read_bytes()
            text += Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in text:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(text.split(b"\0", 1)[0].decode(errors="replace"))
    return killed


async def stop_launcher(launcher: Launcher) -> int:
    """SIGTERM the launcher, wait for it, close everything; returns its exit status."""
    launcher.channel.close()
    if launcher.process.returncode is None:
        launcher.process.send_signal(signal.SIGTERM)
    try:
        code = await asyncio.wait_for(launcher.process.wait(), 120)
    except TimeoutError:
        launcher.process.kill()
        code = await launcher.process.wait()
    server: Server = launcher.extra["notify_server"]
    server.close()
    await server.wait_closed()
    log = await asyncio.to_thread(launcher.log.read_text)
    # Whatever the outcome, nothing the launcher started may outlive it.
    leftovers = await asyncio.to_thread(_kill_leftovers, launcher.base)
    namespace = launcher.extra.get("mount_namespace")
    if namespace is not None:
        leftovers += await asyncio.to_thread(_kill_namespace, namespace)
    # The launcher ran with blockbuster active: a blocking call on its loop is a bug.
    assert "BlockingError" not in log, log
    assert leftovers == [], f"processes outlived the launcher: {leftovers}\n{log}"
    return code


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def launcher(
    request: pytest.FixtureRequest, tiny_guest: TinyGuest, launcher_user: tuple[int, int] | None
) -> AsyncIterator[Launcher]:
    """One virt-launcher process for a test module, stopped (SIGTERM) afterwards."""
    failed_before = request.session.testsfailed
    running = await start_launcher(tiny_guest, launcher_user)
    yield running
    await stop_launcher(running)
    if request.session.testsfailed > failed_before:
        # Keep the evidence: the launcher's log, libvirtd's and QEMU's logs stay on disk.
        print(f"virt-launcher files kept in {running.base}")
    else:
        await asyncio.to_thread(shutil.rmtree, running.base, True)


async def read_serial_until(path: Path, marker: str, within: float = 120.0) -> str:
    """Connect to a serial console socket and read until ``marker`` shows up."""
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(_socket_exists, path):
        if time.monotonic() > deadline:
            pytest.fail(f"{path}: no serial console socket within {within}s")
        await asyncio.sleep(0.05)
    reader, writer = await asyncio.open_unix_connection(str(path))
    seen = b""
    try:
        while marker.encode() not in seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(
                    f"no {marker!r} on the serial console within {within}s: {seen[-500:]!r}"
                )
            try:
                chunk = await asyncio.wait_for(reader.read(4096), remaining)
            except TimeoutError:
                continue
            if not chunk:
                pytest.fail(f"serial console closed before {marker!r}: {seen[-500:]!r}")
            seen += chunk
    finally:
        writer.close()
    return seen.decode(errors="replace")


@pytest.fixture
def serial_reader() -> Callable[..., Any]:
    """:func:`read_serial_until`, for tests (conftest functions are not importable)."""
    return read_serial_until


@pytest_asyncio.fixture(loop_scope="session")
async def launcher_control(
    request: pytest.FixtureRequest, tiny_guest: TinyGuest, launcher_user: tuple[int, int] | None
) -> AsyncIterator[tuple[Callable[..., Any], Callable[..., Any]]]:
    """(start, stop) for tests that own their launcher's whole life; cleaned up after."""
    started: list[Launcher] = []
    failed_before = request.session.testsfailed

    async def start(
        grace_period: int = 30,
        unprivileged: bool = False,
        guest: TinyGuest | None = None,
        pod_paths: bool = False,
        uid: str | None = None,
    ) -> Launcher:
        if (unprivileged or pod_paths) and launcher_user is None:
            pytest.skip("needs root: the launcher is started as another user")
        run_as = launcher_user if unprivileged or pod_paths else None
        launcher = await start_launcher(
            guest or tiny_guest, launcher_user, grace_period, run_as, pod_paths, uid
        )
        started.append(launcher)
        return launcher

    yield start, stop_launcher
    for launcher in started:
        if launcher.process.returncode is None:
            await stop_launcher(launcher)
        if request.session.testsfailed == failed_before:
            await asyncio.to_thread(shutil.rmtree, launcher.base, True)
