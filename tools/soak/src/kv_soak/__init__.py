"""kv-soak: a bounded soak of kubevirt-py on the local cluster.

N VMs churn (create, stop, start, restart, delete, pause/unpause, migrate) while
virt-api, the leading virt-controller, virt-handler, a virt-launcher, kube-apiserver,
etcd and a kubelet are killed with SIGKILL one at a time; invariants are checked on every
poll and at the end. `Soak` is the loop (seams and clock injected); `kv_soak.local` holds
the real seams; `kv_soak.cli` the command.
"""

from kv_soak.faults import Target
from kv_soak.soak import Soak, SoakReport, SoakSettings

__all__ = ["Soak", "SoakReport", "SoakSettings", "Target"]
