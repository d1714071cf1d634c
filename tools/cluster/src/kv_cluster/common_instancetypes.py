"""The step of `up` that installs the common cluster instancetypes and preferences.

As virt-operator does on a stock install: kubevirt_api's common-instancetypes table (u1,
o1, cx1, m1, n1, rt1, d1 and the OS preferences) is applied once the CRDs exist, unless
the KubeVirt CR says `spec.configuration.commonInstancetypesDeployment.enabled: false`;
then the objects this step installed are removed again (upstream's opt-out does the same).
Server-side apply with kv-cluster's field manager: a re-run of `up` changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from kubevirt_api import ClusterConfig
from kubevirt_api.common_instancetypes import cluster_instancetypes, cluster_preferences

from kv_cluster.kubectl import Kubectl
from kv_cluster.kubevirt_cr import NAMESPACE
from kv_cluster.plan import KUBEVIRT_ADMISSION, KUBEVIRT_CONFIG, KUBEVIRT_CRDS

__all__ = ["MANAGED_BY", "CommonInstancetypes", "labelled"]

#: The label (key, value) that marks objects this step owns, as virt-operator marks its own.
MANAGED_BY: Final = ("app.kubernetes.io/managed-by", "kv-cluster")
_RESOURCES: Final = (
    "virtualmachineclusterinstancetypes.instancetype.kubevirt.io,"
    "virtualmachineclusterpreferences.instancetype.kubevirt.io"
)


def labelled(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` with the installer's labels added (the table's own labels kept)."""
    metadata = dict(obj["metadata"])
    metadata["labels"] = {
        **metadata.get("labels", {}),
        MANAGED_BY[0]: MANAGED_BY[1],
        "app.kubernetes.io/component": "compute",
    }
    return {**obj, "metadata": metadata}


class CommonInstancetypes:
    """Install (or, when opted out, remove) the common instancetypes and preferences."""

    name = "common-instancetypes"
    provides: frozenset[str] = frozenset()

    def __init__(
        self, kubectl: Kubectl, *, after_kubevirt_cr: bool, after_admission: bool = False
    ) -> None:
        """`after_kubevirt_cr`: this `up` also makes the KubeVirt CR, so read it after;
        `after_admission`: it also (re)starts virt-api, whose webhooks validate these."""
        self.kubectl = kubectl
        self.requires = frozenset(
            {KUBEVIRT_CRDS}
            | ({KUBEVIRT_CONFIG} if after_kubevirt_cr else set())
            | ({KUBEVIRT_ADMISSION} if after_admission else set())
        )

    def _configuration(self) -> ClusterConfig:
        found = self.kubectl.run(
            "get", "kubevirts.kubevirt.io", "-n", NAMESPACE, "-o", "json", check=False
        )
        if found.returncode != 0:
            # No CR (KubeVirt's components not run by this cluster): a stock install.
            return ClusterConfig()
        items = json.loads(found.stdout).get("items") or [None]
        return ClusterConfig.from_kubevirt(items[0])

    def ensure(self) -> str:
        if not self._configuration().common_instancetypes_deployment:
            out = self.kubectl.run(
                "delete",
                _RESOURCES,
                "-l",
                "=".join(MANAGED_BY),
                "--ignore-not-found",
                "-o",
                "name",
            )
            removed = len(out.stdout.split())
            return f"opted out (commonInstancetypesDeployment.enabled: false), {removed} removed"
        instancetypes, preferences = cluster_instancetypes(), cluster_preferences()
        body = {
            "apiVersion": "v1",
            "kind": "List",
            "items": [labelled(o) for o in instancetypes + preferences],
        }
        self.kubectl.run(
            "apply",
            "--server-side",
            "--field-manager=kv-cluster",
            "-f",
            "-",
            "-o",
            "name",
            stdin=json.dumps(body),
        )
        return f"{len(instancetypes)} instancetypes and {len(preferences)} preferences applied"
