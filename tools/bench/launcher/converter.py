"""Converter throughput: VMIs converted to domain XML per second (printed, never judged).

Run: ``uv run python tools/bench/launcher/converter.py [--seconds N]``

Three workloads: a minimal VMI, upstream's all-features converter-test VMI (13 disks,
Hyper-V, timers), and every convertible upstream example VMI in turn. Each is loaded
once; the timed loop is ``convert(vmi).to_xml()`` only. The ratio line compares the
all-features VMI with the minimal one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubevirt_api import VirtualMachineInstance, load
from virt_domain import ConversionError, ConverterOptions, convert

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "compat" / "upstream-kubevirt" / "examples"

MINIMAL: dict[str, Any] = {
    "metadata": {
        "name": "tiny",
        "namespace": "bench",
        "uid": "00000000-0000-0000-0000-000000000001",
    },
    "spec": {
        "domain": {
            "memory": {"guest": "128Mi"},
            "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
        },
        "volumes": [{"name": "root", "containerDisk": {"image": "example/cirros:latest"}}],
    },
}


def _upstream_test_vmi() -> dict[str, Any]:
    """The VMI of upstream's converter test (kept beside virt-domain's agreement test)."""
    path = REPO / "libs" / "virt-domain" / "tests" / "data" / "upstream-converter-test-vmi.yaml"
    vmi: dict[str, Any] = yaml.safe_load(path.read_text())
    return vmi


def _examples() -> list[VirtualMachineInstance]:
    found = []
    for path in sorted(EXAMPLES.glob("vmi-*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "VirtualMachineInstance":
                doc["metadata"]["uid"] = "00000000-0000-0000-0000-000000000002"
                vmi = load(VirtualMachineInstance, doc)
                try:
                    convert(vmi)
                except ConversionError:
                    continue
                found.append(vmi)
    return found


def _rate(work: Callable[[], object], seconds: float, rounds: int = 5) -> tuple[float, float]:
    """Median calls per second of wall time and of this process's CPU time.

    CPU time is the steadier figure on a shared machine (other processes only slow the
    wall clock); both are printed.
    """
    wall_rates, cpu_rates = [], []
    for _ in range(rounds):
        count = 0
        start, cpu_start = time.perf_counter(), time.process_time()
        deadline = start + seconds / rounds
        while True:
            work()
            count += 1
            now = time.perf_counter()
            if now >= deadline:
                break
        cpu = max(time.process_time() - cpu_start, 1e-9)
        wall_rates.append(count / (now - start))
        cpu_rates.append(count / cpu)
    return statistics.median(wall_rates), statistics.median(cpu_rates)


def main(argv: list[str] | None = None) -> int:
    """Print VMIs/s for each workload and the all-features / minimal ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=5.0, help="time per workload")
    args = parser.parse_args(argv)
    options = ConverterOptions(block_volumes=frozenset({"pvc_block_test", "dv_block_test"}))
    minimal = load(VirtualMachineInstance, MINIMAL)
    full = load(VirtualMachineInstance, _upstream_test_vmi())
    examples = _examples()
    cycle = iter(())

    def next_example() -> object:
        nonlocal cycle
        try:
            vmi = next(cycle)
        except StopIteration:
            cycle = iter(examples)
            vmi = next(cycle)
        return convert(vmi).to_xml()

    results = {
        "minimal VMI (1 disk)": _rate(lambda: convert(minimal, options).to_xml(), args.seconds),
        "upstream all-features VMI (13 disks)": _rate(
            lambda: convert(full, options).to_xml(), args.seconds
        ),
        f"upstream examples, round robin ({len(examples)} VMIs)": _rate(next_example, args.seconds),
    }
    print(f"converter throughput (python {sys.version.split()[0]}, {args.seconds:g}s per workload)")
    print(f"  {'workload':<45} {'VMIs/s wall':>12} {'VMIs/CPU-s':>12}")
    for name, (wall, cpu) in results.items():
        print(f"  {name:<45} {wall:12.0f} {cpu:12.0f}")
    small = results["minimal VMI (1 disk)"][1]
    large = results["upstream all-features VMI (13 disks)"][1]
    print(f"  ratio all-features / minimal CPU time per VMI: {small / large:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
