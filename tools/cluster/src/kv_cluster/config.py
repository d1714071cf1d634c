"""Where a local cluster lives and which addresses it uses, read from the environment."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_HOST_IP",
    "DEFAULT_PORT_BASE",
    "DEFAULT_SERVICE_CIDR",
    "KUBERNETES_VERSION",
    "ClusterConfig",
    "ConfigError",
    "Ports",
    "default_state_dir",
]

# The pinned Kubernetes release built from the Go module proxy; staging modules are v0.<minor>.<patch>.
KUBERNETES_VERSION = "v1.37.2"
DEFAULT_PORT_BASE = 26400
DEFAULT_SERVICE_CIDR = "10.96.0.0/16"
DEFAULT_POD_CIDR = "10.244.0.0/16"
# An address put on `lo`: local-only like 127.0.0.1, but accepted in Endpoints/EndpointSlices
# (which refuse the loopback range), so Services can point at processes on this host.
DEFAULT_HOST_IP = "10.95.0.1"


class ConfigError(ValueError):
    """An environment variable or saved configuration holds a value that cannot be used."""


@dataclass(frozen=True)
class Ports:
    """Every port of one cluster, laid out from one base so clusters never overlap.

    Offsets 0-9 are the control plane; 10-19 are reserved for the node (kubelet, kube-proxy);
    20-29 for KubeVirt's components (kv_cluster.kubevirt).
    """

    base: int

    @property
    def etcd_client(self) -> int:
        return self.base

    @property
    def etcd_peer(self) -> int:
        return self.base + 1

    @property
    def apiserver(self) -> int:
        return self.base + 2

    @property
    def controller_manager(self) -> int:
        return self.base + 3

    @property
    def scheduler(self) -> int:
        return self.base + 4

    @property
    def registry(self) -> int:
        """The image registry (kv_cluster.registry)."""
        return self.base + 5

    def node(self, offset: int) -> int:
        """Port `offset` (0-9) of the range reserved for node components."""
        if not 0 <= offset <= 9:
            raise ConfigError(f"node port offset must be 0..9, not {offset}")
        return self.base + 10 + offset


def default_state_dir(env: Mapping[str, str]) -> Path:
    """$XDG_STATE_HOME/kubevirt-py/cluster, i.e. ~/.local/state/kubevirt-py/cluster by default."""
    xdg = env.get("XDG_STATE_HOME")
    root = Path(xdg) if xdg else Path(env.get("HOME", str(Path.home()))) / ".local" / "state"
    return root / "kubevirt-py" / "cluster"


def _cache_dir(env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path(env.get("HOME", str(Path.home()))) / ".cache"
    return root / "kubevirt-py"


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster's settings. `from_env` reads them; `save`/`load` pin them in the state dir."""

    state_dir: Path
    cache_dir: Path
    ports: Ports
    host_ip: str = DEFAULT_HOST_IP
    service_cidr: str = DEFAULT_SERVICE_CIDR
    pod_cidr: str = DEFAULT_POD_CIDR
    kubernetes_version: str = KUBERNETES_VERSION
    cluster_name: str = "kubevirt-py"

    @property
    def kubernetes_service_ip(self) -> str:
        """The first address of the service range: the `kubernetes` Service's ClusterIP."""
        return str(next(ipaddress.ip_network(self.service_cidr).hosts()))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClusterConfig:
        """Read KV_CLUSTER_* variables; unset ones take the documented defaults."""
        env = os.environ if env is None else env
        state = env.get("KV_CLUSTER_STATE_DIR")
        cache = env.get("KV_CLUSTER_CACHE_DIR")
        config = cls(
            state_dir=Path(state).expanduser() if state else default_state_dir(env),
            cache_dir=Path(cache).expanduser() if cache else _cache_dir(env),
            ports=Ports(_port_base(env.get("KV_CLUSTER_PORT_BASE"))),
            host_ip=env.get("KV_CLUSTER_HOST_IP", DEFAULT_HOST_IP),
            service_cidr=env.get("KV_CLUSTER_SERVICE_CIDR", DEFAULT_SERVICE_CIDR),
            pod_cidr=env.get("KV_CLUSTER_POD_CIDR", DEFAULT_POD_CIDR),
            kubernetes_version=env.get("KV_CLUSTER_KUBERNETES_VERSION", KUBERNETES_VERSION),
        )
        config.validate()
        return config

    def validate(self) -> None:
        """Raise ConfigError naming the variable when a value cannot work."""
        if not self.state_dir.is_absolute():
            raise ConfigError(
                f"KV_CLUSTER_STATE_DIR must be an absolute path, not {self.state_dir}"
            )
        if ".." in self.state_dir.parts:
            raise ConfigError(f"KV_CLUSTER_STATE_DIR must not contain '..': {self.state_dir}")
        if not self.cache_dir.is_absolute() or ".." in self.cache_dir.parts:
            raise ConfigError(
                f"KV_CLUSTER_CACHE_DIR must be an absolute path without '..', not {self.cache_dir}"
            )
        try:
            host = ipaddress.ip_address(self.host_ip)
        except ValueError:
            raise ConfigError(
                f"KV_CLUSTER_HOST_IP must be an IPv4 address, not {self.host_ip!r}"
            ) from None
        if host.version != 4 or host.is_loopback or host.is_link_local or host.is_unspecified:
            raise ConfigError(
                f"KV_CLUSTER_HOST_IP={self.host_ip} must be an IPv4 address outside the loopback "
                "and link-local ranges (EndpointSlices refuse those)"
            )
        for var, value in (
            ("KV_CLUSTER_SERVICE_CIDR", self.service_cidr),
            ("KV_CLUSTER_POD_CIDR", self.pod_cidr),
        ):
            try:
                net = ipaddress.ip_network(value)
            except ValueError:
                raise ConfigError(
                    f"{var} must be a CIDR like 10.96.0.0/16, not {value!r}"
                ) from None
            if net.version != 4 or not net.is_private:
                raise ConfigError(f"{var}={value} must be a private IPv4 range")
            if host in net:
                raise ConfigError(
                    f"KV_CLUSTER_HOST_IP={self.host_ip} must lie outside {var}={value}"
                )
        if not self.kubernetes_version.startswith("v1."):
            raise ConfigError(
                f"KV_CLUSTER_KUBERNETES_VERSION must look like v1.37.2, not {self.kubernetes_version!r}"
            )

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (paths as strings, ports as their base)."""
        raw = dataclasses.asdict(self)
        raw["state_dir"] = str(self.state_dir)
        raw["cache_dir"] = str(self.cache_dir)
        raw["ports"] = self.ports.base
        return raw

    def differences(self, other: ClusterConfig) -> list[str]:
        """Names of the settings (besides the cache dir) in which two configs differ."""
        mine, theirs = self.to_json(), other.to_json()
        return [k for k in mine if k != "cache_dir" and mine[k] != theirs.get(k)]

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ClusterConfig:
        """Inverse of to_json; raises ConfigError on a malformed record."""
        try:
            config = cls(
                state_dir=Path(str(raw["state_dir"])),
                cache_dir=Path(str(raw["cache_dir"])),
                ports=Ports(int(raw["ports"])),
                host_ip=str(raw["host_ip"]),
                service_cidr=str(raw["service_cidr"]),
                pod_cidr=str(raw["pod_cidr"]),
                kubernetes_version=str(raw["kubernetes_version"]),
                cluster_name=str(raw["cluster_name"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"saved cluster config is malformed: {exc}") from None
        config.validate()
        return config

    def save(self, path: Path) -> None:
        """Write the config atomically to `path`."""
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> ClusterConfig:
        """Read a config written by save."""
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read saved cluster config {path}: {exc}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"saved cluster config {path} is not a JSON object")
        return cls.from_json(raw)


def _port_base(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_PORT_BASE
    try:
        base = int(value)
    except ValueError:
        raise ConfigError(f"KV_CLUSTER_PORT_BASE must be an integer, not {value!r}") from None
    if not 1024 <= base <= 65535 - 30:
        raise ConfigError(f"KV_CLUSTER_PORT_BASE must be within 1024..65505, not {base}")
    return base
