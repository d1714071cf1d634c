"""A short soak (`kv-soak --vms 3 --minutes 3`) on the e2e cluster: VMs churn while
virt-api, the leading virt-controller, virt-handler, a virt-launcher, kube-apiserver,
etcd and a kubelet are killed with SIGKILL one at a time; every invariant must hold.

The seed is random unless KV_SOAK_SEED gives one; the failure message carries the
tool's whole output, seed first, so a failed run can be replayed with `--seed`.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from typing import Any

SOAK_VMS = 3
SOAK_MINUTES = 3
#: Boot, 3 minutes of churn and faults, settle, restore, consoles: well under this.
SOAK_TIMEOUT = 1500


def test_a_short_soak_holds_every_invariant(kubevirt: Any) -> None:
    seed = int(os.environ.get("KV_SOAK_SEED") or random.randrange(2**31))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kv_soak.cli",
            f"--vms={SOAK_VMS}",
            f"--minutes={SOAK_MINUTES}",
            f"--seed={seed}",
        ],
        capture_output=True,
        text=True,
        timeout=SOAK_TIMEOUT,
        check=False,
    )
    output = f"kv-soak --seed {seed} exited {proc.returncode}\n{proc.stderr[-6000:]}\n{proc.stdout}"
    print(output)  # the table, with `-s`
    assert proc.returncode == 0, output
    table = proc.stdout
    assert "every invariant held" in table, output
    for row in (
        "VMs lost (of 3 that should run)",
        "duplicate launcher pods",
        "duplicate QEMU processes",
        "VMIs stuck in a non-final phase",
        "5xx from virt-api (no fault in progress)",
    ):
        line = next(line for line in table.splitlines() if line.startswith(row))
        assert line.split()[-2:] == ["0", "held"], output
    faults = next(line for line in table.splitlines() if line.startswith("faults injected"))
    assert int(faults.split()[-1]) >= 1, output
