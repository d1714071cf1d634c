"""KubeVirt installed the way users install it: the release manifests and virt-operator.

The default of `kv-cluster up` with at least one node (`KV_CLUSTER_KUBEVIRT=operator`)
builds the images, pushes them to the cluster's registry under one release tag (a digest
of the images' content tags), applies `kubevirt-operator.yaml` as
`python -m virt_operator.release --tag <release>` renders it, then the KubeVirt CR, and
waits for the CR's Available condition. The operator installs the CRDs and every
component, the webhook configurations and APIServices with its own CA; nothing here writes
a component's manifest. The CA bundle is copied to `virt_api_ca_file` for the clients on
this host that talk to virt-api directly (Prometheus, the tests).

What this cluster needs beyond a stock cluster goes through the CR's
`spec.customizeComponents` (upstream's way): the handler's node paths and log file
(`handler_daemonset`), virt-api's hostPort, and the API server's address for clusters
without kube-proxy. `useEmulation` and the feature gates are the CR's configuration.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from kv_images import Builder, BuildError, HostError, HttpRegistry, Layout, Progress, find_workspace
from virt_operator.certificates import CA_NAME
from virt_operator.release import kubevirt_cr, operator_objects
from virt_operator.strategy import DEFAULT_REGISTRY, InstallSpec, render

from kv_cluster.components import ComponentError
from kv_cluster.crds import CrdsError, wait_established
from kv_cluster.kubevirt_cr import developer_configuration
from kv_cluster.kubevirt_pods import (
    IMAGES,
    KubevirtPods,
    _api_env,
    _with_env,
    handler_daemonset,
    virt_api_ca_file,
    virt_api_host_port,
)
from kv_cluster.plan import (
    CONTROLLER_MANAGER,
    KUBEVIRT_ADMISSION,
    KUBEVIRT_CONFIG,
    KUBEVIRT_CRDS,
    NODE,
    REGISTRY,
    SCHEDULER,
)
from kv_cluster.registry import registry_endpoint

__all__ = ["OPERATOR_IMAGES", "KubevirtOperator", "customizations"]

# virt-exportserver: virt-controller names it in exporter pods (--exporter-image, same tag).
OPERATOR_IMAGES = (*IMAGES, "virt-operator", "virt-exportserver")
NAMESPACE = "kubevirt"
# Where the customizations go: paths of a rendered workload this cluster changes.
_CONTAINER = "/spec/template/spec/containers/0"
_PATHS = {
    "DaemonSet": (
        f"{_CONTAINER}/command",
        f"{_CONTAINER}/args",
        f"{_CONTAINER}/env",
        f"{_CONTAINER}/volumeMounts",
        "/spec/template/spec/volumes",
    ),
    "Deployment": (f"{_CONTAINER}/env", f"{_CONTAINER}/ports", "/spec/strategy"),
}


def _at(doc: dict[str, Any], path: str) -> Any:
    node: Any = doc
    for token in path.strip("/").split("/"):
        node = node[int(token)] if isinstance(node, list) else node.get(token)
        if node is None:
            return None
    return node


def customizations(kv_cluster_view: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    """customizeComponents.patches that turn the operator's stock workloads into
    `kv_cluster_view` (name -> this cluster's version of that workload)."""
    stock = render(InstallSpec())
    patches = []
    for workload in stock.workloads():
        name = workload["metadata"]["name"]
        wanted = kv_cluster_view.get(name)
        if wanted is None:
            continue
        ops = [
            {"op": "add", "path": path, "value": _at(wanted, path)}
            for path in _PATHS[workload["kind"]]
            if _at(wanted, path) is not None and _at(wanted, path) != _at(workload, path)
        ]
        if ops:
            patches.append(
                {
                    "resourceName": name,
                    "resourceType": workload["kind"],
                    "patch": json.dumps(ops, sort_keys=True),
                    "type": "json",
                }
            )
    return patches


class KubevirtOperator(KubevirtPods):
    """virt-operator from the release manifest, and the KubeVirt CR it installs from."""

    requires = frozenset({NODE, SCHEDULER, CONTROLLER_MANAGER, REGISTRY})
    # The operator installs the CRDs and the components; the CR is this step's too.
    provides = frozenset({KUBEVIRT_CRDS, KUBEVIRT_CONFIG, KUBEVIRT_ADMISSION})

    def _release(self) -> str:
        """Build and push every image, tagged also with one release tag; returns the tag."""
        t0 = time.monotonic()
        try:
            builder = Builder(find_workspace(), Layout.default(), Progress())
            built = [b for b in builder.build(OPERATOR_IMAGES) if b.name in OPERATOR_IMAGES]
            digest = hashlib.sha256(" ".join(sorted(b.ref for b in built)).encode())
            tag = f"kv-{digest.hexdigest()[:12]}"
            builder.push_to(built, HttpRegistry(registry_endpoint(self.ctx)), tags=[tag])
        except (BuildError, HostError, FileNotFoundError) as exc:
            raise ComponentError(f"building KubeVirt's images failed: {exc}") from None
        self._say(f"images ready ({time.monotonic() - t0:.1f}s), release tag {tag}")
        return tag

    def _cluster_view(self) -> dict[str, dict[str, Any]]:
        """This cluster's workloads as pods mode renders them (node paths, hostPort, env)."""
        stock = render(InstallSpec())
        api_env = _api_env(self.ctx)
        api = json.loads(json.dumps(stock.virt_api))
        virt_api_host_port(api, self.ctx)
        controller = json.loads(json.dumps(stock.virt_controller))
        handler = handler_daemonset(
            stock.virt_handler, self.ctx.layout.root / "nodes", self.ctx.layout.root / "logs"
        )
        for doc in (api, controller, handler):
            _with_env(doc["spec"]["template"]["spec"]["containers"][0], api_env)
        return {"virt-api": api, "virt-controller": controller, "virt-handler": handler}

    def kubevirt_cr(self, tag: str) -> dict[str, Any]:
        cr = kubevirt_cr(NAMESPACE)
        cr["spec"]["imageTag"] = tag
        cr["spec"]["configuration"] = {"developerConfiguration": developer_configuration()}
        cr["spec"]["customizeComponents"] = {"patches": customizations(self._cluster_view())}
        return cr

    def _available(self) -> dict[str, str]:
        found = self.kubectl.run(
            "get", "kv", "kubevirt", "-n", NAMESPACE, "-o", "json", check=False
        )
        if found.returncode != 0:
            return {"kubevirt/kubevirt": "absent"}
        status = json.loads(found.stdout).get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") == "Available" and cond.get("status") == "True":
                return {"kubevirt/kubevirt": ""}
        return {"kubevirt/kubevirt": f"phase {status.get('phase') or 'none'}"}

    def ensure(self) -> str:
        """Images, the operator manifest, the CR; wait for Available and the APIService."""
        before = self._available()
        tag = self._release()
        self._stop_host_mode()
        operator = operator_objects(DEFAULT_REGISTRY, tag)
        for doc in operator:
            if doc["kind"] == "Deployment":
                _with_env(doc["spec"]["template"]["spec"]["containers"][0], _api_env(self.ctx))
        self._apply(operator)
        # The CR needs its CRD served first (a fresh apiserver takes a moment).
        try:
            wait_established(
                self.kubectl,
                ["customresourcedefinition.apiextensions.k8s.io/kubevirts.kubevirt.io"],
                120.0,
            )
        except CrdsError as exc:
            raise ComponentError(str(exc)) from exc
        self._apply([self.kubevirt_cr(tag)])
        self._say("kubevirt-operator.yaml and the KubeVirt CR applied; the operator installs")
        self._wait(self._available, "KubeVirt", self.startup_timeout)
        self._wait(self.workloads, "workloads", self.startup_timeout)
        self._wait(self._apiservices, "APIService", 120.0)
        self._copy_ca()
        return "running" if not any(before.values()) else "deployed"

    def register(self, timeout: float = 120.0) -> None:
        """The operator owns the registrations: wait for the APIServices, refresh the CA copy."""
        self._wait(self._apiservices, "APIService", timeout)
        self._copy_ca()

    def _copy_ca(self) -> None:
        found = self.kubectl.run(
            "get", "configmap", CA_NAME, "-n", NAMESPACE, "-o", "json", check=False
        )
        data = (json.loads(found.stdout).get("data") or {}) if found.returncode == 0 else {}
        bundle = data.get("ca-bundle")
        if not isinstance(bundle, str) or not bundle:
            raise ComponentError(f"the operator's CA bundle (configmap {CA_NAME}) is missing")
        target = virt_api_ca_file(self.ctx)
        if not target.exists() or target.read_text() != bundle:
            target.write_text(bundle)

    def stop(self) -> bool:
        # The operator would put back what pods mode's stop unregisters; the cluster's
        # `down` takes everything with it.
        return False
