"""kv-soak's command line: bounded by count and time, targets by name, a replayable seed."""

from __future__ import annotations

import pytest
from kv_soak.cli import main, parse_args
from kv_soak.faults import Target


def test_count_and_time_are_required() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--vms", "3"])
    args = parse_args(["--vms", "3", "--minutes", "2.5", "--seed", "9"])
    assert (args.vms, args.minutes, args.seed) == (3, 2.5, 9)
    assert args.targets == tuple(Target)


def test_targets_and_the_fault_gap_are_parsed() -> None:
    args = parse_args(
        ["--vms", "1", "--minutes", "1", "--targets", "etcd,kubelet", "--fault-gap", "5:9"]
    )
    assert args.targets == (Target.ETCD, Target.KUBELET)
    assert args.fault_gap == (5.0, 9.0)
    with pytest.raises(SystemExit):
        parse_args(["--vms", "1", "--minutes", "1", "--targets", "kube-proxy"])


def test_nonsense_figures_are_refused_before_touching_a_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--vms", "0", "--minutes", "1"]) == 2
    assert "--vms must be >= 1" in capsys.readouterr().err
    assert main(["--vms", "1", "--minutes", "1", "--fault-gap", "9:5"]) == 2
