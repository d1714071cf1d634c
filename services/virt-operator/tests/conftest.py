"""Fixtures: the in-memory API server, a clock, and a reconciler over them."""

from __future__ import annotations

import pytest
from virt_operator.fakes import FakeClock, FakeCluster
from virt_operator.reconcile import KubeVirtReconciler, OperatorIdentity


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def operator(cluster: FakeCluster, clock: FakeClock) -> KubeVirtReconciler:
    return KubeVirtReconciler(
        cluster,
        cluster,
        cluster.kubevirts,
        OperatorIdentity("registry.example/kubevirt-py", "v1", "v1"),
        now=clock,
    )
