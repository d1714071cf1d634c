"""`kv-cluster {up,down,status,kubeconfig}`: the local control plane from the command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kv_cluster.cluster import Cluster, ClusterError
from kv_cluster.components import ComponentError
from kv_cluster.config import ConfigError
from kv_cluster.crds import CrdsError
from kv_cluster.gobuild import BuildError
from kv_cluster.hostnet import HostNetError
from kv_cluster.kubectl import KubectlError
from kv_cluster.nodes import read_node_count
from kv_cluster.plan import PlanError

__all__ = ["main"]

_EPILOG = """\
environment:
  KV_CLUSTER_STATE_DIR   state dir (default ~/.local/state/kubevirt-py/cluster)
  KV_CLUSTER_PORT_BASE   first of 20 ports (default 26400)
  KV_CLUSTER_HOST_IP     cluster address put on lo (default 10.95.0.1)
  KV_CLUSTER_REGISTRY    1: run the image registry (base+5) with --nodes 0 too
  KV_CLUSTER_SERVICE_CIDR, KV_CLUSTER_POD_CIDR, KV_CLUSTER_CACHE_DIR, KV_CLUSTER_ETCD,
  KV_CLUSTER_CRDS_DIR    see docs/local-cluster.md
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kv-cluster",
        description="A real local Kubernetes control plane for kubevirt-py.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="build if needed, start what is not running, install CRDs")
    up.add_argument(
        "--no-crds",
        action="store_true",
        help="do not apply manifests/crds (refused while KubeVirt's components run)",
    )
    up.add_argument(
        "--nodes",
        type=int,
        default=None,
        metavar="N",
        help="worker nodes (kubelet + containerd each); default: as before, else 1; 0: none",
    )
    up.add_argument(
        "--prometheus",
        action="store_true",
        help="also run Prometheus (built from the Go module proxy) scraping KubeVirt's pods, "
        "with its rules",
    )
    up.add_argument(
        "--via-operator",
        action="store_true",
        help="install KubeVirt through the release manifests and virt-operator: the default "
        "(kept for scripts); KV_CLUSTER_KUBEVIRT=pods or host selects a developer mode",
    )
    sub.add_parser("down", help="stop the processes this cluster started and delete its state")
    sub.add_parser("status", help="show each component's process and health")
    sub.add_parser("kubeconfig", help="print the admin kubeconfig path")
    return parser


def _up(cluster: Cluster, no_crds: bool, nodes: int | None, prometheus: bool) -> int:
    if nodes is None:
        nodes = read_node_count(cluster.layout) or 1
    result = cluster.up(install=not no_crds, nodes=nodes, prometheus=prometheus)
    done = ", ".join(f"{name} {action}" for name, action in result.actions.items())
    print(f"kv-cluster: up in {result.seconds:.1f}s ({done})")
    print(f"kv-cluster: export KUBECONFIG={result.kubeconfig}")
    return 0


def _status(cluster: Cluster) -> int:
    if not cluster.exists:
        print(f"kv-cluster: no cluster in {cluster.layout.root} (run `kv-cluster up`)")
        return 3
    statuses = cluster.status()
    width = max(len(s.name) for s in statuses)
    for s in statuses:
        pid = str(s.pid) if s.pid is not None else "-"
        state = "healthy" if s.health.ok else "UNHEALTHY"
        detail = (
            "" if s.health.ok else f"  {s.health.detail.splitlines()[0] if s.health.detail else ''}"
        )
        print(f"{s.name:<{width}}  pid {pid:<8} {state}{detail}")
        if s.name == "prometheus" and s.health.ok:
            print(f"{'':<{width}}  {s.health.detail}")
    for change, present in cluster.host_network().items():
        print(f"{'host':<{width}}  {change}: {'present' if present else 'MISSING'}")
    print(f"kubeconfig: {cluster.kubeconfig}")
    return 0 if all(s.health.ok for s in statuses) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `kv-cluster` script; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        cluster = Cluster.from_env()
        if args.command == "up":
            if args.via_operator:
                os.environ["KV_CLUSTER_KUBEVIRT"] = "operator"
            return _up(cluster, args.no_crds, args.nodes, args.prometheus)
        if args.command == "down":
            for line in cluster.down():
                print(f"kv-cluster: {line}")
            print(f"kv-cluster: removed {cluster.layout.root}")
            return 0
        if args.command == "status":
            return _status(cluster)
        print(cluster.kubeconfig)
        if not cluster.kubeconfig.exists():
            print("kv-cluster: (not written yet: run `kv-cluster up`)", file=sys.stderr)
            return 1
        return 0
    except (
        ConfigError,
        ClusterError,
        ComponentError,
        BuildError,
        HostNetError,
        KubectlError,
        PlanError,
        CrdsError,
    ) as exc:
        print(f"kv-cluster: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kv-cluster: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
