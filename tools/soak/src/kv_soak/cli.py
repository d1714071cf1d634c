"""`kv-soak`: a bounded soak of the local cluster (see tools/soak/README.md).

    uv run kv-soak --vms 20 --minutes 20            # prints its seed first
    uv run kv-soak --vms 3 --minutes 3 --seed 42     # replays the same choices

Only the local kv-cluster of this environment (KV_CLUSTER_* settings, as `kv-cluster`
reads them) is touched: its admin kubeconfig, its recorded processes, its nodes' containerd.
Exit 0 when every invariant held, 1 when one broke, 2 for a usage or setup error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import urlsplit

from kube_runtime import (
    ApiError,
    ClientSettings,
    KubeClient,
    Resource,
    SystemClock,
    connect,
    get_or_none,
)
from kv_cluster import Cluster
from kv_cluster.kubevirt_pods import runs_as_pods
from kv_cluster.nodes import read_node_count

from kv_soak.faults import Target
from kv_soak.guest import VirtctlConsole
from kv_soak.local import (
    SOAK_LABEL,
    ApiActions,
    ApiObserver,
    ApiserverMetrics,
    ClusterInjector,
)
from kv_soak.report import render
from kv_soak.soak import Soak, SoakSettings

__all__ = ["main", "parse_args"]

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)


class SetupError(Exception):
    """The run cannot start; the message says why."""


def _gap(text: str) -> tuple[float, float]:
    low, _, high = text.partition(":")
    try:
        pair = (float(low), float(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected SECONDS or LOW:HIGH") from None
    return pair


def _targets(text: str) -> tuple[Target, ...]:
    known = {t.value: t for t in Target}
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown target(s) {', '.join(unknown) or '(none)'}; known: {', '.join(known)}"
        )
    return tuple(known[n] for n in names)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="kv-soak",
        description="Churn VMs on the local cluster while killing its components one at a "
        "time; check invariants throughout and print them at the end.",
    )
    p.add_argument("--vms", type=int, required=True, help="VMs kept churning")
    p.add_argument("--minutes", type=float, required=True, help="minutes of churn and faults")
    p.add_argument("--seed", type=int, help="random seed (printed; pass it to replay a run)")
    p.add_argument("--faults", type=int, help="at most this many faults (default: as time allows)")
    p.add_argument(
        "--targets",
        type=_targets,
        default=tuple(Target),
        help=f"comma-separated components to kill (default all: {','.join(Target)})",
    )
    p.add_argument(
        "--fault-gap",
        type=_gap,
        default=(10.0, 40.0),
        metavar="LOW:HIGH",
        help="seconds of quiet before each fault, drawn uniformly (default 10:40)",
    )
    p.add_argument("--churn-interval", type=float, help="seconds between churn actions")
    p.add_argument("--no-migrations", action="store_true", help="leave migrations out of the churn")
    p.add_argument(
        "--settle-timeout", type=float, default=420.0, help="seconds to settle at the end"
    )
    p.add_argument("--boot-timeout", type=float, default=600.0, help="seconds for the first boot")
    p.add_argument("--namespace", help="namespace for the VMs (default kv-soak-<seed>)")
    p.add_argument("--keep", action="store_true", help="leave the namespace and its VMs behind")
    return p.parse_args(argv)


async def _fresh_namespace(client: KubeClient, namespace: str) -> None:
    """Create the run's namespace; one left by an earlier run of the same seed is still
    terminating, or was kept: wait (at most 3 minutes) for it to go."""
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {SOAK_LABEL: "true"}},
    }
    for _ in range(180):
        try:
            await client.create(NAMESPACES, body)
            return
        except ApiError as error:
            if error.status != 409:
                raise
        existing = await get_or_none(client, NAMESPACES, namespace)
        labels = ((existing or {}).get("metadata") or {}).get("labels") or {}
        if existing is not None and labels.get(SOAK_LABEL) != "true":
            raise SetupError(f"namespace {namespace} exists and is not a soak's; pick another")
        print(f"kv-soak: waiting for an earlier namespace {namespace} to go", file=sys.stderr)
        with contextlib.suppress(ApiError):
            await client.delete(NAMESPACES, namespace)
        await asyncio.sleep(1.0)
    raise SetupError(f"namespace {namespace} of an earlier run did not go within 3 minutes")


async def _soak(args: argparse.Namespace, settings: SoakSettings) -> int:
    cluster = Cluster.from_env()
    if not cluster.exists or read_node_count(cluster.layout) < 1:
        print(
            "kv-soak: no local cluster with a node; run `kv-cluster up --nodes 2`", file=sys.stderr
        )
        return 2
    ctx = cluster._context()
    if not runs_as_pods(ctx):
        print(
            "kv-soak: KubeVirt must run as pods (kv-cluster's default, through virt-operator, "
            "or KV_CLUSTER_KUBEVIRT=pods), not as host processes",
            file=sys.stderr,
        )
        return 2
    if read_node_count(cluster.layout) < 2 and settings.migrations:
        settings = replace(settings, migrations=False)  # nowhere to migrate to
    namespace = args.namespace or f"kv-soak-{settings.seed}"
    client = await connect(
        cluster.kubeconfig,
        settings=ClientSettings(qps=50, burst=100, request_timeout=15, user_agent="kv-soak"),
    )
    host = urlsplit(str(client.api_client.configuration.host)).hostname
    if host != cluster.config.host_ip:  # the local cluster only, never another
        print(f"kv-soak: the kubeconfig points at {host}, not this cluster", file=sys.stderr)
        return 2
    created = False
    try:
        await _fresh_namespace(client, namespace)
        created = True
        clock = SystemClock()
        soak = Soak(
            settings,
            clock=clock,
            observer=ApiObserver(client, namespace, clock),
            actions=ApiActions(client, namespace),
            injector=ClusterInjector(ctx, client, namespace),
            console=VirtctlConsole(cluster.kubeconfig, namespace),
            metrics=ApiserverMetrics(client),
        )
        report = await soak.run()
        print(render(report), flush=True)
        return 0 if report.ok else 1
    except SetupError as error:
        print(f"kv-soak: {error}", file=sys.stderr)
        return 2
    finally:
        if created and not args.keep:
            try:
                await client.delete(NAMESPACES, namespace)
            except ApiError as error:
                print(f"kv-soak: deleting namespace {namespace}: {error}", file=sys.stderr)
        await client.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    try:
        settings = SoakSettings(
            vms=args.vms,
            minutes=args.minutes,
            seed=seed,
            targets=args.targets,
            migrations=not args.no_migrations,
            max_faults=args.faults,
            churn_interval=args.churn_interval,
            fault_gap=args.fault_gap,
            settle_timeout=args.settle_timeout,
            boot_timeout=args.boot_timeout,
        )
    except ValueError as error:
        print(f"kv-soak: {error}", file=sys.stderr)
        return 2
    return asyncio.run(_soak(args, settings))


if __name__ == "__main__":
    sys.exit(main())
