"""containerd for one node: private config, root, state and socket.

Settings this host needs (docs/node.md): `restrict_oom_score_adj` (no CAP_SYS_RESOURCE, so
negative OOM scores are refused), cgroupfs (no systemd), runc state under the node's dir,
a sandbox image built and imported here (no registry), CNI from the node's own conf dir.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from kv_cluster.components import ClusterContext, Component, ComponentError
from kv_cluster.health import Health
from kv_cluster.nodes import NodeSpec
from kv_cluster.plan import containerd_on

__all__ = ["NO_REGISTRY_PROXY", "Containerd", "render_containerd_config"]

_CNI_BIN = "/usr/lib/cni"
NO_REGISTRY_PROXY = "http://127.0.0.1:1"


def _toml_str(value: str | Path) -> str:
    text = str(value)
    if any(c in text for c in '"\\\n'):
        raise ComponentError(f"path unusable in containerd config: {text!r}")
    return f'"{text}"'


def render_containerd_config(node: NodeSpec, sandbox_image: str) -> str:
    """containerd's config.toml (version 2) for `node`."""
    d = node.containerd_dir
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""\
version = 2
root = {_toml_str(d / "root")}
state = {_toml_str(d / "state")}
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = {_toml_str(node.containerd_socket)}

[ttrpc]
  address = {_toml_str(str(node.containerd_socket) + ".ttrpc")}

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = {_toml_str(d / "opt")}

[{cri}]
  sandbox_image = {_toml_str(sandbox_image)}
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  device_ownership_from_security_context = true
  max_container_log_line_size = 16384

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
  discard_unpacked_layers = false

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "/usr/sbin/runc"
  Root = {_toml_str(d / "runc")}

[{cri}.cni]
  bin_dir = {_toml_str(_CNI_BIN)}
  conf_dir = {_toml_str(node.cni_dir / "net.d")}
  max_conf_num = 1

[{cri}.registry]
  config_path = ""
"""


class Containerd(Component):
    """One node's containerd."""

    startup_timeout = 30.0

    def __init__(self, ctx: ClusterContext, node: NodeSpec, sandbox_image: str) -> None:
        super().__init__(ctx)
        self.node = node
        self.sandbox_image = sandbox_image
        self.name = f"containerd-{node.name}"
        self.provides = frozenset({containerd_on(node.name)})

    @property
    def config_path(self) -> Path:
        return self.node.containerd_dir / "config.toml"

    def prepare(self) -> None:
        d = self.node.containerd_dir
        for sub in (d, d / "root", d / "state", d / "runc", d / "opt"):
            sub.mkdir(parents=True, exist_ok=True)
        d.chmod(0o700)
        self.config_path.write_text(render_containerd_config(self.node, self.sandbox_image))
        self.node.containerd_socket.unlink(missing_ok=True)

    def argv(self) -> list[str]:
        # Images come from kv-images only. Every registry request goes through this proxy,
        # a closed local port, so a pull fails at once and never leaves the machine (not
        # even a DNS lookup of the registry's name).
        return [
            "/usr/bin/env",
            f"HTTP_PROXY={NO_REGISTRY_PROXY}",
            f"HTTPS_PROXY={NO_REGISTRY_PROXY}",
            "NO_PROXY=",
            "/usr/bin/containerd",
            "--config",
            str(self.config_path),
            "--log-level",
            "warn",
        ]

    def listens(self) -> list[tuple[str, int]]:
        return []

    def health(self) -> Health:
        sock = self.node.containerd_socket
        if not sock.is_socket():
            return Health(False, f"no socket at {sock}")
        proc = subprocess.run(
            ["ctr", "--address", str(sock), "--timeout", "3s", "version"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            return Health(False, proc.stderr.strip()[:300])
        return Health(True, "serving")
