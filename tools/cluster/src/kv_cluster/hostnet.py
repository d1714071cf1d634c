"""Host network changes a cluster needs, recorded so `down` undoes only what `up` did.

- The cluster's host address goes on `lo`: as local as 127.0.0.1, but allowed in
  EndpointSlices, so Services can name processes that run on this host.
- Blackhole routes for cluster ranges (the service CIDR here; the pod CIDR with the node):
  a packet for a cluster address that nothing translated must die here, never reach the
  default route.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["HostNetError", "HostNetwork"]


class HostNetError(RuntimeError):
    """An `ip` command failed; the message carries its output."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        out = subprocess.run(["ip", *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise HostNetError("the `ip` command (iproute2) is not installed") from None
    if check and out.returncode != 0:
        raise HostNetError(f"ip {' '.join(args)} failed: {out.stderr.strip()}")
    return out


@dataclass
class HostNetwork:
    """The changes one cluster made; persisted as JSON at `path`."""

    path: Path
    addresses: list[str] = field(default_factory=list)
    blackholes: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> HostNetwork:
        """The record at `path`, or an empty one."""
        try:
            raw = json.loads(path.read_text())
            return cls(path, list(raw.get("addresses", [])), list(raw.get("blackholes", [])))
        except (OSError, ValueError, AttributeError):
            return cls(path)

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"addresses": self.addresses, "blackholes": self.blackholes}) + "\n"
        )
        tmp.replace(self.path)

    def ensure_loopback_address(self, ip: str) -> None:
        """Put `ip/32` on `lo` unless it is already on some interface."""
        shown = _ip("-o", "addr", "show", "to", f"{ip}/32").stdout
        if shown.strip():
            return
        _ip("addr", "add", f"{ip}/32", "dev", "lo")
        if ip not in self.addresses:
            self.addresses.append(ip)
        self._save()

    def ensure_blackhole(self, cidr: str) -> None:
        """Add `blackhole <cidr>` unless a route for exactly that prefix exists."""
        shown = _ip("route", "show", "exact", cidr).stdout
        if shown.strip():
            return
        _ip("route", "add", "blackhole", cidr)
        if cidr not in self.blackholes:
            self.blackholes.append(cidr)
        self._save()

    def present(self) -> dict[str, bool]:
        """For each change this cluster made, whether it is still in place."""
        state: dict[str, bool] = {}
        for ip in self.addresses:
            state[f"address {ip} on lo"] = bool(
                _ip("-o", "addr", "show", "dev", "lo", "to", f"{ip}/32", check=False).stdout.strip()
            )
        for cidr in self.blackholes:
            state[f"blackhole {cidr}"] = (
                "blackhole" in _ip("route", "show", "exact", cidr, check=False).stdout
            )
        return state

    def undo(self) -> list[str]:
        """Remove what this record added; returns what was removed."""
        removed = []
        for ip in list(self.addresses):
            if _ip("addr", "del", f"{ip}/32", "dev", "lo", check=False).returncode == 0:
                removed.append(f"address {ip}")
            self.addresses.remove(ip)
        for cidr in list(self.blackholes):
            if _ip("route", "del", "blackhole", cidr, check=False).returncode == 0:
                removed.append(f"blackhole {cidr}")
            self.blackholes.remove(cidr)
        self.path.unlink(missing_ok=True)
        return removed
