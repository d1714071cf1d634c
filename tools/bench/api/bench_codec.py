"""kubevirt_api codec throughput: load, dump and defaulting of upstream's examples.

    uv run python tools/bench/api/bench_codec.py [--seconds 3]

Loads the 44 objects of our kinds from compat/upstream-kubevirt/examples, then times
(1) copy.deepcopy of the plain dicts (the floor: touching every value once),
(2) load into the typed models, (3) dump back, (4) vmi_defaults + json_patch on the
VMIs. Prints microseconds per object and the ratio to the deepcopy floor. Never fails.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubevirt_api import dump, load_object
from kubevirt_api.defaults import DefaultsConfig, json_patch, vmi_defaults

ROOT = Path(__file__).resolve().parents[3]
NOT_OURS = {"PriorityClass", "ResourceClaimTemplate"}


def _documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted((ROOT / "compat/upstream-kubevirt/examples").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] not in NOT_OURS]
    return docs


def _per_object(items: list[Any], work: Callable[[Any], object], seconds: float) -> float:
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for item in items:
            work(item)
        done += len(items)
    return (time.perf_counter() - start) / done * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    started = time.perf_counter()
    docs = _documents()
    models = [load_object(d) for d in docs]
    print(
        f"{len(docs)} objects; first load incl. schema build: {time.perf_counter() - started:.3f} s"
    )
    config = DefaultsConfig()
    vmis = [d for d in docs if d["kind"] == "VirtualMachineInstance"]
    floor = _per_object(docs, copy.deepcopy, args.seconds)
    figures = {
        "deepcopy (floor)": floor,
        "load": _per_object(docs, load_object, args.seconds),
        "dump": _per_object(models, dump, args.seconds),
        "vmi_defaults + json_patch": _per_object(
            vmis, lambda d: json_patch(d, vmi_defaults(d, config)), args.seconds
        ),
    }
    for name, micros in figures.items():
        print(f"{name:28s} {micros:9.1f} us/object  {micros / floor:6.1f}x deepcopy")


if __name__ == "__main__":
    main()
