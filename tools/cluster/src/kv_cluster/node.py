"""The local node(s): host preparation, components in start order, and teardown.

`NodeSet.components()` is what `kv-cluster up` starts after the control plane: per node a
containerd and a kubelet, then one kube-proxy and one DNS server for the host. Host
changes (sysctls the kubelet and the CNI bridge set, an egress guard, cgroup dirs, bridges)
are recorded under `<state>/nodes/` and undone by `teardown`.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from kv_images import (
    Builder,
    BuildError,
    BuiltImage,
    HostError,
    HttpRegistry,
    Layout,
    Progress,
    find_workspace,
    repository,
)

from kv_cluster.cgroups import CgroupRoot, own_cgroup
from kv_cluster.cni import conflist_text, remove_hostport_rules
from kv_cluster.components import ClusterContext, Component, ComponentError
from kv_cluster.containerd import Containerd
from kv_cluster.dns import ClusterDns
from kv_cluster.kubectl import Kubectl
from kv_cluster.kubelet import Kubelet
from kv_cluster.kubeproxy import KubeProxy, cleanup_kube_proxy_rules, kube_proxy_enabled
from kv_cluster.nodehost import (
    EgressGuard,
    SysctlRecord,
    check_node_host,
    other_process_running,
    unmount_below,
)
from kv_cluster.nodes import NodeSpec, node_specs, read_node_count
from kv_cluster.registry import registry_guard

__all__ = ["NodeContainerd", "NodeSet"]

_MEMORY_CGROUPS = Path("/sys/fs/cgroup/memory")

# The kubelet (kernel tunables) and the CNI bridge plugin (forwarding) set these.
_SYSCTLS = (
    "net.ipv4.ip_forward",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)


class NodeContainerd(Containerd):
    """containerd whose sandbox image (kv-images' pause) is in the cluster's registry before
    it starts: the CRI plugin pulls it from there like every other image."""

    def __init__(self, ctx: ClusterContext, node: NodeSpec, sandbox: BuiltImage | None) -> None:
        super().__init__(ctx, node, sandbox.ref if sandbox else f"{repository('pause')}:unknown")
        self.sandbox = sandbox

    def ensure(self) -> str:
        if self.sandbox is None:
            raise ComponentError(f"{self.name}: no pause image built (components(build=False))")
        try:
            builder = Builder(find_workspace(), Layout.default(), Progress())
            builder.push_to([self.sandbox], HttpRegistry(self.endpoint))
        except (HostError, FileNotFoundError) as exc:
            raise ComponentError(f"{self.name}: pushing the pause image failed: {exc}") from None
        return super().ensure()


class NodeSet:
    """The nodes of one cluster (count from `--nodes`, remembered in the state dir)."""

    def __init__(self, ctx: ClusterContext, count: int | None = None) -> None:
        self.ctx = ctx
        self.count = count if count is not None else read_node_count(ctx.layout)
        self.specs = node_specs(ctx.config, ctx.layout, self.count) if self.count else []
        self.root = ctx.layout.root / "nodes"

    def _cgroup(self, node: NodeSpec, *, starting: bool = False) -> CgroupRoot:
        """The node's cgroup root: the saved one while the cgroup it nests in still exists
        (a restarted kubelet keeps its pods' cgroups), else one under our own cgroup."""
        record = node.root / "cgroups-created.json"
        saved = node.root / "cgroup-root"
        if saved.exists():
            path = saved.read_text().strip()
            outer = path.rsplit("/", 2)[0] or "/"
            if not starting or (_MEMORY_CGROUPS / outer.lstrip("/")).is_dir():
                return CgroupRoot(path, record)
        base = own_cgroup().rstrip("/")
        return CgroupRoot(f"{base}/kubevirt-py-{self.ctx.config.ports.base}/{node.name}", record)

    def _sandbox(self) -> BuiltImage:
        try:
            builder = Builder(find_workspace(), Layout.default(), Progress())
            [image] = builder.build(["pause"])
        except (BuildError, HostError, FileNotFoundError) as exc:
            raise ComponentError(f"building the node's pause image failed: {exc}") from None
        return image

    def prepare_host(self) -> None:
        """Check the host, record sysctls, add routes/guards, make cgroup dirs and CNI configs."""
        if not self.specs:
            return
        check_node_host()
        ours = KubeProxy(self.ctx, self.specs[0]).record()
        if (
            kube_proxy_enabled()
            and not (ours and ours.alive())
            and other_process_running("kube-proxy")
        ):
            raise ComponentError(
                "another cluster's kube-proxy runs on this host; kube-proxy's iptables chains "
                "are host-wide, so only one cluster per host can run nodes: take that cluster's "
                "nodes down (`kv-cluster up --nodes 0` with its KV_CLUSTER_STATE_DIR) or start "
                "this one with --nodes 0"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        SysctlRecord(self.root / "sysctls.json").remember(_SYSCTLS)
        EgressGuard(self.root / "egress.json", self.ctx.config).ensure()
        registry_guard(self.root / "registry-guard.json", self.ctx.config).ensure()
        for node in self.specs:
            node.root.mkdir(parents=True, exist_ok=True)
            cgroup = self._cgroup(node, starting=True)
            cgroup.ensure()
            (node.root / "cgroup-root").write_text(cgroup.path + "\n")
            netd = node.cni_dir / "net.d"
            netd.mkdir(parents=True, exist_ok=True)
            (netd / "10-kubevirt-py.conflist").write_text(conflist_text(self.ctx.config, node))
        self.write_description()

    def components(self, *, build: bool = True) -> list[Component]:
        """Start order: containerd and kubelet per node, then kube-proxy and DNS.

        `build=False` (status, down) skips building the pause image; such components can be
        inspected and stopped but not started.
        """
        if not self.specs:
            return []
        sandbox = self._sandbox() if build else None
        components: list[Component] = []
        for node in self.specs:
            cgroup_path = self._cgroup(node).path
            components.append(NodeContainerd(self.ctx, node, sandbox))
            components.append(Kubelet(self.ctx, node, cgroup_path))
        if kube_proxy_enabled():
            components.append(KubeProxy(self.ctx, self.specs[0]))
        components.append(ClusterDns(self.ctx))
        return components

    def beyond(self, keep: int) -> list[Component]:
        """The components to stop when only the first `keep` nodes stay (shared ones at 0)."""
        picked: list[Component] = []
        for c in self.components(build=False):
            if isinstance(c, (Containerd, Kubelet)):
                if c.node.index >= keep:
                    picked.append(c)
            elif keep == 0:
                picked.append(c)  # kube-proxy and DNS serve every node
        return picked

    def stop_pods(self, keep: int = 0) -> None:
        """Kill and delete every container of the nodes from index `keep` on (kubelet and
        containerd leave them running when they stop)."""
        for node in self.specs[keep:]:
            sock = node.containerd_socket
            if not sock.is_socket():
                continue
            ctr = ["ctr", "--address", str(sock), "-n", "k8s.io", "--timeout", "20s"]
            tasks = subprocess.run(
                [*ctr, "tasks", "ls", "-q"], capture_output=True, text=True, check=False
            )
            for task in tasks.stdout.split():
                subprocess.run(
                    [*ctr, "tasks", "kill", "-s", "SIGKILL", task], capture_output=True, check=False
                )
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                left = subprocess.run(
                    [*ctr, "tasks", "ls", "-q"], capture_output=True, text=True, check=False
                )
                for task in left.stdout.split():
                    subprocess.run(
                        [*ctr, "tasks", "delete", "--force", task], capture_output=True, check=False
                    )
                if not left.stdout.split():
                    break
                time.sleep(0.2)
            containers = subprocess.run(
                [*ctr, "containers", "ls", "-q"], capture_output=True, text=True, check=False
            )
            for container in containers.stdout.split():
                subprocess.run(
                    [*ctr, "containers", "delete", container], capture_output=True, check=False
                )

    def forget(self, keep: int) -> list[str]:
        """Delete the Node objects of the nodes from index `keep` on (after a scale-down)."""
        kubectl = Kubectl(self.ctx.layout.admin_kubeconfig)
        done = []
        for node in self.specs[keep:]:
            proc = kubectl.run("delete", "node", node.name, "--wait=false", check=False, timeout=30)
            if proc.returncode == 0:
                done.append(f"deleted Node {node.name}")
        return done

    def teardown(self, keep: int = 0) -> list[str]:
        """Undo the host changes of the nodes from index `keep` on, and the shared ones when
        no node stays (call after their processes stopped)."""
        done: list[str] = []
        if keep == 0:
            if kube_proxy_enabled() and cleanup_kube_proxy_rules(self.ctx):
                done.append("removed kube-proxy's iptables rules")
            done += EgressGuard(self.root / "egress.json", self.ctx.config).remove()
            done += registry_guard(self.root / "registry-guard.json", self.ctx.config).remove()
        for node in self.specs[keep:]:
            done += remove_hostport_rules(node.pod_subnet)
            done += unmount_below(node.root)
            if (
                subprocess.run(
                    ["ip", "link", "del", node.bridge], capture_output=True, check=False
                ).returncode
                == 0
            ):
                done.append(f"deleted bridge {node.bridge}")
            done += [f"removed cgroup {p}" for p in self._cgroup(node).remove()]
        if keep == 0:
            done += SysctlRecord(self.root / "sysctls.json").restore()
        return done

    def describe(self) -> list[dict[str, str]]:
        """Per node: name, subnet, bridge, containerd socket, kubelet root (for other tools)."""
        return [
            {
                "name": n.name,
                "podSubnet": n.pod_subnet,
                "bridge": n.bridge,
                "containerdSocket": str(n.containerd_socket),
                "kubeletRootDir": str(n.kubelet_root),
            }
            for n in self.specs
        ]

    def write_description(self) -> None:
        (self.root / "nodes-info.json").write_text(json.dumps(self.describe(), indent=2) + "\n")
