"""Host-side facts and changes the node needs, each recorded so `down` can undo exactly it."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from kv_cluster.components import ComponentError
from kv_cluster.config import ClusterConfig

__all__ = [
    "ChainGuard",
    "EgressGuard",
    "NodeHostError",
    "SysctlRecord",
    "check_node_host",
    "missing_node_packages",
    "other_process_running",
    "unmount_below",
]

# What the node runs, and the Debian package that ships it.
_NEEDED: dict[str, str] = {
    "/usr/bin/containerd": "containerd",
    "/usr/bin/ctr": "containerd",
    "/usr/sbin/runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "/usr/lib/cni/host-local": "containernetworking-plugins",
    "/usr/lib/cni/portmap": "containernetworking-plugins",
    "/usr/lib/cni/loopback": "containernetworking-plugins",
    "iptables": "iptables",
    "conntrack": "conntrack",
    "ip": "iproute2",
    "gcc": "gcc",
    "buildah": "buildah",
}


class NodeHostError(ComponentError):
    """The host lacks something the node needs; the message names the packages."""


def missing_node_packages(needed: dict[str, str] | None = None) -> list[str]:
    """Debian packages whose program (absolute path or name on PATH) is absent."""
    missing = set()
    for program, package in (needed or _NEEDED).items():
        found = Path(program).is_file() if program.startswith("/") else shutil.which(program)
        if not found:
            missing.add(package)
    return sorted(missing)


def check_node_host() -> None:
    """Raise NodeHostError with the command that installs what is missing."""
    missing = missing_node_packages()
    if missing:
        raise NodeHostError(
            f"the node needs Debian package(s) that are not installed: {', '.join(missing)}; "
            f"install them with `apt-get install {' '.join(missing)}` "
            "(or `make setup`, which installs everything in tools/host-packages.txt)"
        )


def other_process_running(comm: str) -> bool:
    """True when some process named `comm` runs (call after stopping our own)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() == comm:
                return True
        except OSError:
            continue
    return False


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


class SysctlRecord:
    """The values some sysctls had before the node started, to put back on teardown."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def remember(self, names: Iterable[str]) -> None:
        """Save current values once (a second `up` keeps the first record)."""
        if self.path.exists():
            return
        values = {}
        for name in names:
            try:
                values[name] = _sysctl_path(name).read_text().strip()
            except OSError:
                continue
        self.path.write_text(json.dumps(values, indent=2) + "\n")

    def restore(self) -> list[str]:
        """Put the remembered values back, unless another cluster's kubelet still runs."""
        if other_process_running("kubelet"):
            return []
        try:
            values = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        done = []
        for name, value in values.items():
            path = _sysctl_path(str(name))
            try:
                if path.read_text().strip() != value:
                    path.write_text(f"{value}\n")
                    done.append(f"restored {name}={value}")
            except OSError:
                continue
        self.path.unlink(missing_ok=True)
        return done


class ChainGuard:
    """An iptables chain of `rules`, jumped to first from the built-in chain `hook`; its
    record (written once it is in place) is what `remove` undoes."""

    def __init__(self, record: Path, chain: str, hook: str, rules: list[list[str]]) -> None:
        self.record = record
        self.chain = chain
        self.hook = hook
        self.rules = rules

    def _ipt(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["iptables", "-w", *args], capture_output=True, text=True, check=False
        )

    def ensure(self) -> None:
        if self._ipt("-n", "-L", self.chain).returncode != 0:
            self._ipt("-N", self.chain)
        self._ipt("-F", self.chain)
        for rule in self.rules:
            self._ipt("-A", self.chain, *rule)
        if self._ipt("-C", self.hook, "-j", self.chain).returncode != 0:
            out = self._ipt("-I", self.hook, "1", "-j", self.chain)
            if out.returncode != 0:
                raise NodeHostError(
                    f"iptables: cannot add {self.chain} to {self.hook}: {out.stderr.strip()}"
                )
        self.record.write_text(json.dumps({"chain": self.chain}) + "\n")

    def remove(self) -> list[str]:
        if not self.record.exists():
            return []
        while self._ipt("-D", self.hook, "-j", self.chain).returncode == 0:
            pass
        self._ipt("-F", self.chain)
        self._ipt("-X", self.chain)
        self.record.unlink(missing_ok=True)
        return [f"removed iptables chain {self.chain}"]


class EgressGuard(ChainGuard):
    """An iptables FORWARD rule: pod traffic may be forwarded only to other pods.

    Pods have no default route, but a pod with NET_ADMIN could add one; this keeps its
    packets from ever being forwarded to this host's uplink.
    """

    def __init__(self, record: Path, config: ClusterConfig) -> None:
        pods = config.pod_cidr
        super().__init__(
            record,
            f"KVPY-{config.ports.base}-EGRESS",
            "FORWARD",
            [["-s", pods, "-d", pods, "-j", "RETURN"], ["-s", pods, "-j", "DROP"]],
        )


def unmount_below(root: Path) -> list[str]:
    """Unmount everything mounted under `root` (deepest first): kubelet volumes, rootfs mounts."""
    prefix = str(root.resolve()) + "/"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    points = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            point = fields[4].replace("\\040", " ")
            if point.startswith(prefix):
                points.append(point)
    done = []
    for point in sorted(set(points), key=len, reverse=True):
        if subprocess.run(["umount", point], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        done.append(f"unmounted {point}")
    return done
