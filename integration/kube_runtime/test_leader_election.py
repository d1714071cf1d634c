"""Two replicas of a toy controller as processes: one leads; kill -9 it, the other takes over."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_runtime import CONFIGMAPS, LEASES, ApiError, KubeClient

TOY = Path(__file__).with_name("toy_controller.py")
LEASE_DURATION = 6.0
RETRY_PERIOD = 1.0


async def eventually(predicate: Callable[[], Awaitable[Any]], within: float, what: str) -> Any:
    deadline = time.monotonic() + within
    while not (result := await predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"within {within}s: {what}")
        await asyncio.sleep(0.1)
    return result


def read_log(path: Path) -> list[tuple[str, str, str, float]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        kind, who, key, at = line.split()
        rows.append((kind, who, key, float(at)))
    return rows


@pytest.fixture
def replicas(
    private_cluster: Any, private_namespace: str, tmp_path: Path
) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    namespace = private_namespace
    procs = {}
    for name in ("replica-a", "replica-b"):
        procs[name] = subprocess.Popen(
            [
                sys.executable,
                str(TOY),
                "--kubeconfig",
                str(private_cluster.kubeconfig),
                "--namespace",
                namespace,
                "--identity",
                name,
                "--log",
                str(tmp_path / f"{name}.log"),
            ],
            stdout=(tmp_path / f"{name}.out").open("wb"),
            stderr=subprocess.STDOUT,
        )
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


async def test_one_leader_kill_9_fails_over_within_the_lease_and_no_key_runs_twice(
    private_cluster: Any,
    private_namespace: str,
    tmp_path: Path,
    replicas: dict[str, subprocess.Popen[bytes]],
    clients: Callable[..., Awaitable[KubeClient]],
) -> None:
    namespace = private_namespace
    client = await clients(private_cluster.kubeconfig, qps=100, burst=100)
    keys = [f"toy-{i:02}" for i in range(20)]
    await asyncio.gather(
        *(
            client.create(
                CONFIGMAPS,
                {"metadata": {"name": k, "namespace": namespace, "labels": {"toy": "1"}}},
            )
            for k in keys
        )
    )

    async def holder() -> str:
        try:
            lease = await client.get(LEASES, "toy-controller", namespace)
        except ApiError as exc:
            if exc.not_found:
                return ""
            raise
        return str(lease["spec"].get("holderIdentity") or "")

    leader = await eventually(holder, 60, "a replica takes the lease")
    follower = next(n for n in replicas if n != leader)

    async def annotated_by(who: str) -> bool:
        page = await client.list(CONFIGMAPS, namespace, label_selector="toy=1")
        return all(
            (i["metadata"].get("annotations") or {}).get("toy/reconciled-by") == who
            for i in page["items"]
        )

    await eventually(lambda: annotated_by(leader), 60, f"{leader} reconciles every key")
    logs = {n: read_log(tmp_path / f"{n}.log") for n in replicas}
    assert [r for r in logs[leader] if r[0] == "lead"], "the lease holder says it leads"
    assert not [r for r in logs[follower] if r[0] in ("lead", "start")], "the follower is idle"

    # Make work that is in flight when the leader dies.
    await asyncio.gather(
        *(client.merge_patch(CONFIGMAPS, k, {"data": {"v": "1"}}, namespace) for k in keys)
    )
    replicas[leader].kill()
    killed_at = time.monotonic()
    replicas[leader].wait(10)

    async def follower_holds() -> bool:
        return await holder() == follower

    await eventually(follower_holds, LEASE_DURATION * 3, f"{follower} takes the lease")
    took = time.monotonic() - killed_at
    assert took <= LEASE_DURATION + 2 * RETRY_PERIOD * 1.2 + 1.0, f"failover took {took:.1f}s"
    await eventually(lambda: annotated_by(follower), 60, f"{follower} reconciles every key")

    # No key was ever reconciled by both replicas at once.
    logs = {n: read_log(tmp_path / f"{n}.log") for n in replicas}
    intervals: dict[str, list[tuple[float, float, str]]] = {}
    for who, rows in logs.items():
        open_at: dict[str, float] = {}
        for kind, _, key, at in rows:
            if kind == "start":
                open_at[key] = at
            elif kind == "end":
                intervals.setdefault(key, []).append((open_at.pop(key), at, who))
        for key, at in open_at.items():  # cut short by kill -9
            intervals.setdefault(key, []).append((at, killed_at, who))
    for key, spans in intervals.items():
        spans.sort()
        for (_s1, e1, w1), (s2, _, w2) in itertools.pairwise(spans):
            assert not (w1 != w2 and s2 < e1), f"{key}: {w1} and {w2} overlapped"
    first_lead = min(at for kind, _, _, at in logs[follower] if kind == "lead")
    assert first_lead > killed_at
    print(f"failover after kill -9: {took:.2f}s (lease {LEASE_DURATION}s)")

    # An orderly stop releases the lease.
    replicas[follower].terminate()
    replicas[follower].wait(20)
    assert await holder() == ""
