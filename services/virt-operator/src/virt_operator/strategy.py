"""The install strategy: every object a KubeVirt CR asks for, rendered in-process.

Upstream runs a Job (`--dump-install-strategy`) that writes the strategy into a ConfigMap;
here the operator renders it itself (a documented difference) and still writes the
ConfigMap `kubevirt-install-strategy-<id>` with upstream's labels and annotations.
Everything is pure: the CR's spec in, objects out.
"""

from __future__ import annotations

import base64
import copy
import functools
import gzip
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubevirt_api.crds import crd_for
from kubevirt_api.kinds import KINDS

from .components import load
from .patches import ComponentPatch, apply_patches, parse_patches
from .wellknown import (
    IDENTIFIER_ANNOTATION,
    INSTALL_STRATEGY_LABEL,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    OPERATOR_APP,
    REGISTRY_ANNOTATION,
    VERSION_ANNOTATION,
)

__all__ = [
    "DEFAULT_REGISTRY",
    "DEFAULT_TAG",
    "OPERATOR_WEBHOOK_CONFIGURATION",
    "OPERATOR_WEBHOOK_PORT",
    "OPERATOR_WEBHOOK_SERVICE",
    "InstallSpec",
    "Strategy",
    "image_of",
    "render",
    "split_image",
]

DEFAULT_REGISTRY = "docker.io/kubevirt-py"
DEFAULT_TAG = "devel"
OPERATOR_WEBHOOK_SERVICE = "kubevirt-operator-webhook"
OPERATOR_WEBHOOK_CONFIGURATION = "virt-operator-validator"
OPERATOR_WEBHOOK_PORT = 8444
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")


def image_of(registry: str, name: str, tag: str) -> str:
    """`<registry>/<name>:<tag>`, or `<registry>/<name>@<digest>` for a digest."""
    sep = "@" if tag.startswith("sha256:") else ":"
    return f"{registry}/{name}{sep}{tag}"


def split_image(ref: str) -> tuple[str, str]:
    """(registry, tag) of an image reference `<registry>/<name>:<tag>` (the operator's own)."""
    path, sep, tag = ref.rpartition("@") if "@" in ref else ref.rpartition(":")
    if not sep or "/" in tag:
        path, tag = ref, DEFAULT_TAG
    registry = path.rpartition("/")[0]
    return registry or DEFAULT_REGISTRY, tag


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class InstallSpec:
    """What of the KubeVirt CR's spec shapes the install (spec.configuration does not: the
    components read it themselves, so changing it restarts nothing)."""

    namespace: str = "kubevirt"
    registry: str = DEFAULT_REGISTRY
    tag: str = DEFAULT_TAG
    image_pull_policy: str = "IfNotPresent"
    #: spec.infra.replicas: virt-api's and virt-controller's replicas (None: the manifests').
    infra_replicas: int | None = None
    #: spec.infra.nodePlacement / spec.workloads.nodePlacement, as JSON text ("" = none).
    infra_placement: str = ""
    workloads_placement: str = ""
    patches: tuple[ComponentPatch, ...] = field(default_factory=tuple)

    @classmethod
    def from_kubevirt(cls, kubevirt: Mapping[str, Any], *, registry: str, tag: str) -> InstallSpec:
        """The spec of `kubevirt`; `registry`/`tag` are the operator's own (the defaults)."""
        meta = kubevirt.get("metadata") or {}
        spec = kubevirt.get("spec") or {}
        policy = spec.get("imagePullPolicy")
        infra = spec.get("infra")
        infra = infra if isinstance(infra, Mapping) else {}
        workloads = spec.get("workloads")
        workloads = workloads if isinstance(workloads, Mapping) else {}
        replicas = infra.get("replicas")
        return cls(
            namespace=str(meta.get("namespace") or "kubevirt"),
            registry=str(spec.get("imageRegistry") or registry),
            tag=str(spec.get("imageTag") or tag),
            image_pull_policy=policy if policy in _PULL_POLICIES else "IfNotPresent",
            infra_replicas=replicas if isinstance(replicas, int) and replicas > 0 else None,
            infra_placement=_json(infra["nodePlacement"]) if infra.get("nodePlacement") else "",
            workloads_placement=(
                _json(workloads["nodePlacement"]) if workloads.get("nodePlacement") else ""
            ),
            patches=parse_patches(spec.get("customizeComponents")),
        )

    @property
    def version(self) -> str:
        """The KubeVirt version this spec installs: the image tag (upstream's too)."""
        return self.tag

    @property
    def identifier(self) -> str:
        """Upstream's install-strategy identifier: one value per distinct install."""
        text = _json(
            [
                self.namespace,
                self.registry,
                self.tag,
                self.image_pull_policy,
                self.infra_replicas,
                self.infra_placement,
                self.workloads_placement,
                [p.as_json() for p in self.patches],
            ]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def image(self, name: str) -> str:
        return image_of(self.registry, name, self.tag)

    def stamp(self) -> dict[str, str]:
        """The three install-strategy annotations every managed object carries."""
        return {
            VERSION_ANNOTATION: self.version,
            REGISTRY_ANNOTATION: self.registry,
            IDENTIFIER_ANNOTATION: self.identifier,
        }


@dataclass(frozen=True, slots=True)
class Strategy:
    """The rendered objects by stage, in upstream's create order."""

    spec: InstallSpec
    config_map: dict[str, Any]
    crds: list[dict[str, Any]]
    rbac: list[dict[str, Any]]
    services: list[dict[str, Any]]
    virt_api: dict[str, Any]
    virt_controller: dict[str, Any]
    virt_handler: dict[str, Any]
    #: Webhook configurations and APIServices; caBundle is filled by `registrations()`.
    _registrations: list[dict[str, Any]]

    def registrations(self, ca_bundle: bytes) -> list[dict[str, Any]]:
        """The webhook configurations and APIServices trusting `ca_bundle` (PEM)."""
        bundle = base64.b64encode(ca_bundle).decode()
        out = copy.deepcopy(self._registrations)
        for doc in out:
            if doc["kind"] == "APIService":
                doc["spec"]["caBundle"] = bundle
            else:
                for hook in doc.get("webhooks", []):
                    hook["clientConfig"]["caBundle"] = bundle
        return out

    def workloads(self) -> list[dict[str, Any]]:
        return [self.virt_api, self.virt_controller, self.virt_handler]

    def static_objects(self) -> list[dict[str, Any]]:
        """Everything but certificates and registrations (which hold the CA)."""
        return [*self.crds, *self.rbac, *self.services, *self.workloads()]


def _stamped(doc: dict[str, Any], spec: InstallSpec) -> dict[str, Any]:
    meta = doc.setdefault("metadata", {})
    meta.setdefault("labels", {})[MANAGED_BY_LABEL] = MANAGED_BY
    meta.setdefault("annotations", {}).update(spec.stamp())
    template = (doc.get("spec") or {}).get("template")
    if doc.get("kind") in ("Deployment", "DaemonSet") and isinstance(template, dict):
        # The pods carry them too: readiness counts pods of the target install only.
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(spec.stamp())
    return doc


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = doc["spec"]["template"]["spec"]
    return pod


def _set_arg(container: dict[str, Any], flag: str, value: str) -> None:
    args = [a for a in container.get("args", []) if not a.startswith(f"{flag}=")]
    container["args"] = [*args, f"{flag}={value}"]


def _place(pod: dict[str, Any], placement_json: str) -> None:
    """Upstream's nodePlacement: nodeSelector merged, affinity set, tolerations added."""
    if not placement_json:
        return
    placement = json.loads(placement_json)
    if isinstance(placement.get("nodeSelector"), dict):
        pod["nodeSelector"] = {**pod.get("nodeSelector", {}), **placement["nodeSelector"]}
    if isinstance(placement.get("affinity"), dict):
        pod["affinity"] = placement["affinity"]
    if isinstance(placement.get("tolerations"), list):
        pod["tolerations"] = [*pod.get("tolerations", []), *placement["tolerations"]]


def _workload(component: str, file: str, spec: InstallSpec) -> dict[str, Any]:
    (doc,) = load(component, file)
    doc["metadata"]["namespace"] = spec.namespace
    pod = _pod_spec(doc)
    for container in pod["containers"]:
        container["image"] = spec.image(component)
        container["imagePullPolicy"] = spec.image_pull_policy
    if component == "virt-handler":
        _place(pod, spec.workloads_placement)
    else:
        _place(pod, spec.infra_placement)
        if spec.infra_replicas is not None:
            doc["spec"]["replicas"] = spec.infra_replicas
    if component == "virt-controller":
        (container,) = pod["containers"]
        _set_arg(container, "--launcher-image", spec.image("virt-launcher"))
        _set_arg(container, "--exporter-image", spec.image("virt-exportserver"))
        _set_arg(container, "--image-pull-policy", spec.image_pull_policy)
    return doc


def _namespaced(docs: Sequence[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    for doc in docs:
        if doc.get("metadata", {}).get("namespace") == "kubevirt":
            doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects", []):
            if subject.get("namespace") == "kubevirt":
                subject["namespace"] = namespace
    return list(docs)


def _operator_webhook(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The operator's own Service and the webhook that guards the CR's deletion."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": OPERATOR_WEBHOOK_SERVICE,
            "namespace": namespace,
            "labels": {"kubevirt.io": OPERATOR_APP},
        },
        "spec": {
            "selector": {"kubevirt.io": OPERATOR_APP},
            "ports": [
                {
                    "name": "webhooks",
                    "port": 443,
                    "targetPort": OPERATOR_WEBHOOK_PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {
            "name": OPERATOR_WEBHOOK_CONFIGURATION,
            "labels": {"kubevirt.io": OPERATOR_WEBHOOK_CONFIGURATION},
        },
        "webhooks": [
            {
                "name": "kubevirt-validator.kubevirt.io",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {
                        "namespace": namespace,
                        "name": OPERATOR_WEBHOOK_SERVICE,
                        "path": "/kubevirt-validate-delete",
                        "port": 443,
                    },
                    "caBundle": "",
                },
                "rules": [
                    {
                        "operations": ["DELETE"],
                        "apiGroups": ["kubevirt.io"],
                        "apiVersions": ["v1", "v1alpha3"],
                        "resources": ["kubevirts"],
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": 10,
            }
        ],
    }
    return service, webhook


@functools.cache
def _crds() -> tuple[str, ...]:
    return tuple(json.dumps(crd_for(kind)) for kind in KINDS if kind.kind != "KubeVirt")


def installed_crds() -> list[dict[str, Any]]:
    """The CRDs the operator installs: all of kubevirt_api's but the KubeVirt CRD itself,
    which comes with the operator (kubevirt-operator.yaml)."""
    return [json.loads(text) for text in _crds()]


@functools.lru_cache(maxsize=4)
def render(spec: InstallSpec) -> Strategy:
    """The install strategy for `spec` (deterministic: same spec, same objects). Cached:
    callers must not edit what it returns."""
    rbac: list[dict[str, Any]] = []
    for component in ("virt-api", "virt-controller", "virt-handler"):
        rbac += load(component, "rbac.yaml")
    op_service, op_webhook = _operator_webhook(spec.namespace)
    services = [*load("virt-api", "service.yaml"), op_service]
    registrations = [
        *load("virt-api", "webhooks.yaml"),
        *load("virt-api", "apiservice.yaml"),
        op_webhook,
    ]
    for doc in registrations:
        for hook in doc.get("webhooks", []):
            hook["clientConfig"]["service"]["namespace"] = spec.namespace
        if doc["kind"] == "APIService":
            doc["spec"]["service"]["namespace"] = spec.namespace
    api = _workload("virt-api", "deployment.yaml", spec)
    controller = _workload("virt-controller", "deployment.yaml", spec)
    handler = _workload("virt-handler", "daemonset.yaml", spec)
    everything = [
        *installed_crds(),
        *_namespaced(rbac, spec.namespace),
        *_namespaced(services, spec.namespace),
        *registrations,
        api,
        controller,
        handler,
    ]
    apply_patches(everything, spec.patches)
    for doc in everything:
        _stamped(doc, spec)
    # Slices of `everything` after patching (a merge patch replaces an object).
    a = len(installed_crds())
    b = a + len(rbac)
    c = b + len(services)
    return Strategy(
        spec=spec,
        config_map=_strategy_config_map(spec, everything),
        crds=everything[:a],
        rbac=everything[a:b],
        services=everything[b:c],
        virt_api=everything[-3],
        virt_controller=everything[-2],
        virt_handler=everything[-1],
        _registrations=everything[c:-3],
    )


def _strategy_config_map(spec: InstallSpec, objects: list[dict[str, Any]]) -> dict[str, Any]:
    """Upstream's `kubevirt-install-strategy-*` ConfigMap: the manifests gzip+base64."""
    # JSON documents are YAML documents, and json writes 2.7 MB of CRDs far faster.
    text = "".join(f"---\n{json.dumps(o, sort_keys=True)}\n" for o in objects)
    # mtime 0: the same strategy gives the same bytes, so an unchanged one is not rewritten.
    packed = gzip.compress(text.encode(), mtime=0)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"kubevirt-install-strategy-{spec.identifier}",
            "namespace": spec.namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, INSTALL_STRATEGY_LABEL: ""},
            "annotations": spec.stamp(),
        },
        "data": {"manifests": base64.b64encode(packed).decode()},
    }
