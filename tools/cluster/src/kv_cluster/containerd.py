"""containerd for one node: private config, root, state and socket.

containerd itself is built from the Go module proxy (`containerd_build`, cached like
Kubernetes): Debian's 1.6 predates the CRI's image volumes, which Kubernetes ≥ 1.36 serves
and KubeVirt's ImageVolume feature gate uses to mount a containerDisk or kernel image
without a copy. Debian's runc runs the containers; its `ctr` is the health probe.

Settings this host needs (docs/node.md): `restrict_oom_score_adj` (no CAP_SYS_RESOURCE, so
negative OOM scores are refused), cgroupfs (no systemd), runc state under the node's dir,
CNI from the node's own conf dir, and images pulled from the cluster's registry only:
`certs.d/<host>/hosts.toml` makes that registry the one server of docker.io (and of
upstream's `registry:5000`), trusted through the cluster CA.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

from kv_images import RegistryEndpoint

from kv_cluster.components import ClusterContext, Component, ComponentError
from kv_cluster.gobuild import GoBuild, ensure_built
from kv_cluster.health import Health
from kv_cluster.nodes import NodeSpec
from kv_cluster.plan import REGISTRY, containerd_on
from kv_cluster.process import stop_process
from kv_cluster.registry import registry_endpoint

__all__ = [
    "CONTAINERD_VERSION",
    "MIRRORED_REGISTRIES",
    "NO_REGISTRY_PROXY",
    "Containerd",
    "containerd_build",
    "registry_hosts",
    "render_containerd_config",
    "render_hosts_toml",
]

_CNI_BIN = "/usr/lib/cni"
CONTAINERD_VERSION = "v2.4.2"
_MODULE = "github.com/containerd/containerd/v2"


def containerd_build(version: str = CONTAINERD_VERSION) -> GoBuild:
    """containerd and its runc shim at `version`; the snapshotters this host cannot use
    (btrfs, devmapper, zfs) are left out at build time, as in the config."""
    return GoBuild(
        name="containerd",
        version=version,
        requires=((_MODULE, version),),
        packages=(f"{_MODULE}/cmd/containerd", f"{_MODULE}/cmd/containerd-shim-runc-v2"),
        ldflags=f"-s -w -X {_MODULE}/version.Version={version}",
        tags=("no_btrfs", "no_devmapper", "no_zfs"),
        module="kubevirtpy.local/containerdbuild",
    )


NO_REGISTRY_PROXY = "http://127.0.0.1:1"
# Image names the cluster's registry answers for: kubevirt-py's own (`kubevirt-py/<name>` is
# docker.io's) and the upstream examples' `registry:5000/kubevirt/...`.
MIRRORED_REGISTRIES = ("docker.io", "registry:5000")


def _toml_str(value: str | Path) -> str:
    text = str(value)
    if any(c in text for c in '"\\\n'):
        raise ComponentError(f"path unusable in containerd config: {text!r}")
    return f'"{text}"'


def render_hosts_toml(endpoint: RegistryEndpoint) -> str:
    """One `certs.d/<host>/hosts.toml`: pull and resolve from `endpoint`, and nothing else.

    `server` (the fallback containerd tries after the `host` entries; unset it would be
    registry-1.docker.io for docker.io) is the cluster's registry too, so a name the
    registry lacks ends in its 404, never in a request elsewhere.
    """
    url = f"https://{endpoint.address}"
    ca = _toml_str(endpoint.ca) if endpoint.ca else None
    trust = f"ca = {ca}\n" if ca else ""
    return (
        "# kv-cluster: only the cluster's registry; no fallback beyond this machine.\n"
        f"server = {_toml_str(url)}\n"
        'capabilities = ["pull", "resolve"]\n'
        f"{trust}"
        "\n"
        f"[host.{_toml_str(url)}]\n"
        '  capabilities = ["pull", "resolve"]\n' + (f"  {trust}" if trust else "")
    )


def registry_hosts(endpoint: RegistryEndpoint) -> Mapping[str, str]:
    """certs.d dir name -> hosts.toml: the mirrored names and the registry's own address."""
    text = render_hosts_toml(endpoint)
    return {name: text for name in (*MIRRORED_REGISTRIES, endpoint.address)}


def render_containerd_config(node: NodeSpec, sandbox_image: str) -> str:
    """containerd's config.toml (version 3) for `node`; registries from `certs.d/`."""
    d = node.containerd_dir
    images = 'plugins."io.containerd.cri.v1.images"'
    runtime = 'plugins."io.containerd.cri.v1.runtime"'
    return f"""\
version = 3
root = {_toml_str(d / "root")}
state = {_toml_str(d / "state")}
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.erofs",
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

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[{images}]
  snapshotter = "overlayfs"
  discard_unpacked_layers = false

[{images}.pinned_images]
  sandbox = {_toml_str(sandbox_image)}

[{images}.registry]
  config_path = {_toml_str(node.containerd_dir / "certs.d")}

[{runtime}]
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  device_ownership_from_security_context = true
  max_container_log_line_size = 16384

[{runtime}.containerd]
  default_runtime_name = "runc"

[{runtime}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{runtime}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "/usr/sbin/runc"
  Root = {_toml_str(d / "runc")}

[{runtime}.cni]
  bin_dirs = [{_toml_str(_CNI_BIN)}]
  conf_dir = {_toml_str(node.cni_dir / "net.d")}
  max_conf_num = 1
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
        self.requires = frozenset({REGISTRY})

    @property
    def endpoint(self) -> RegistryEndpoint:
        return registry_endpoint(self.ctx)

    @property
    def config_path(self) -> Path:
        return self.node.containerd_dir / "config.toml"

    @property
    def certs_dir(self) -> Path:
        return self.node.containerd_dir / "certs.d"

    def write_hosts(self) -> None:
        """certs.d for the cluster's registry (containerd reads it at every pull)."""
        for name, text in registry_hosts(self.endpoint).items():
            host_dir = self.certs_dir / name
            host_dir.mkdir(parents=True, exist_ok=True)
            path = host_dir / "hosts.toml"
            if not path.is_file() or path.read_text() != text:
                path.write_text(text)

    @property
    def bin_dir(self) -> Path:
        return containerd_build().bin_dir(self.ctx.config.cache_dir)

    def prepare(self) -> None:
        ensure_built(containerd_build(), self.ctx.config.cache_dir)
        d = self.node.containerd_dir
        for sub in (d, d / "root", d / "state", d / "runc", d / "opt"):
            sub.mkdir(parents=True, exist_ok=True)
        d.chmod(0o700)
        self.write_hosts()
        self.config_path.write_text(render_containerd_config(self.node, self.sandbox_image))
        self.node.containerd_socket.unlink(missing_ok=True)

    def ensure(self) -> str:
        """As Component.ensure, and a running containerd whose config or command line is
        older than this tool's is restarted (its containers keep running in their shims)."""
        self.write_hosts()
        record = self.record()
        if record is not None and record.alive():
            rendered = render_containerd_config(self.node, self.sandbox_image)
            on_disk = self.config_path.read_text() if self.config_path.is_file() else ""
            if on_disk != rendered or list(record.argv) != self.argv():
                stop_process(record)
                self.start()
                return "reconfigured"
        return super().ensure()

    def argv(self) -> list[str]:
        # Images come from the cluster's registry only (certs.d). Every other registry
        # request goes through this proxy, a closed local port, so it fails at once and
        # never leaves the machine (not even a DNS lookup of the registry's name).
        return [
            "/usr/bin/env",
            f"HTTP_PROXY={NO_REGISTRY_PROXY}",
            f"HTTPS_PROXY={NO_REGISTRY_PROXY}",
            f"NO_PROXY={self.endpoint.host_port[0]}",
            # The shim is looked up on PATH: the one built with this containerd.
            f"PATH={self.bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
            str(self.bin_dir / "containerd"),
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
        # containerd serves even when its CRI plugin failed to load; the kubelet (and the
        # registry tests' CRI pulls) then get "unknown service runtime.v1.ImageService".
        return _cri_health(sock)


def _cri_health(sock: Path) -> Health:
    """Whether containerd's CRI plugin loaded; its error when it did not."""
    listing = _ctr(sock, "plugins", "ls")
    if isinstance(listing, Health):
        return listing
    status = cri_plugin_status(listing)
    if status == "ok":
        return Health(True, "serving")
    if status is None:
        return Health(False, "containerd lists no CRI plugin (io.containerd.grpc.v1 cri)")
    detailed = _ctr(sock, "plugins", "ls", "--detailed")
    error = ""
    if isinstance(detailed, str):
        found = re.search(r"ID:\s*cri\s*\n(?:.*\n)*?\s*Error:\s*(.*)", detailed)
        error = found.group(1).strip() if found else ""
    return Health(False, f"containerd's CRI plugin is {status}: {error or 'no detail'}"[:300])


def cri_plugin_status(listing: str) -> str | None:
    """The STATUS column of the CRI plugin's row in `ctr plugins ls`, or None if absent."""
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "io.containerd.grpc.v1" and fields[1] == "cri":
            return fields[-1]
    return None


def _ctr(sock: Path, *args: str) -> str | Health:
    proc = subprocess.run(
        ["ctr", "--address", str(sock), "--timeout", "3s", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return Health(False, proc.stderr.strip()[:300])
    return proc.stdout
