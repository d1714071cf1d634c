"""The object graph of a VM or VMI: the objects it owns or uses, as upstream returns them.

Served as the ``objectgraph`` subresource (feature gate ObjectGraph, as upstream). Each
node names one object (``objectReference``: apiGroup, kind, name, namespace), carries the
label ``kubevirt.io/dependency-type`` (compute, storage, network, config) and its
children; nodes a VM can run without (a named instancetype or preference, a Multus
network) are ``optional``. Pure functions over the raw objects: the route reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "DEPENDENCY_LABEL",
    "GraphOptionsError",
    "filter_graph",
    "graph_options",
    "launcher_pod_name",
    "vm_graph",
    "vmi_graph",
]

DEPENDENCY_LABEL = "kubevirt.io/dependency-type"

# resource -> (API group, kind, dependency type): upstream's objectGraphMap.
_RESOURCES: Mapping[str, tuple[str, str, str]] = {
    "virtualmachines": ("kubevirt.io", "VirtualMachine", "compute"),
    "virtualmachineinstances": ("kubevirt.io", "VirtualMachineInstance", "compute"),
    "pods": ("", "Pod", "compute"),
    "virtualmachineinstancetypes": (
        "instancetype.kubevirt.io",
        "VirtualMachineInstancetype",
        "config",
    ),
    "virtualmachineclusterinstancetypes": (
        "instancetype.kubevirt.io",
        "VirtualMachineClusterInstancetype",
        "config",
    ),
    "virtualmachinepreferences": ("instancetype.kubevirt.io", "VirtualMachinePreference", "config"),
    "virtualmachineclusterpreferences": (
        "instancetype.kubevirt.io",
        "VirtualMachineClusterPreference",
        "config",
    ),
    "controllerrevisions": ("apps", "ControllerRevision", "config"),
    "configmaps": ("", "ConfigMap", "config"),
    "secrets": ("", "Secret", "config"),
    "serviceaccounts": ("", "ServiceAccount", "config"),
    "datavolumes": ("cdi.kubevirt.io", "DataVolume", "storage"),
    "persistentvolumeclaims": ("", "PersistentVolumeClaim", "storage"),
    "networkattachmentdefinitions": ("k8s.cni.cncf.io", "NetworkAttachmentDefinition", "network"),
}

Node = dict[str, Any]


class GraphOptionsError(ValueError):
    """The ObjectGraphOptions body is not what upstream accepts."""


def _node(
    resource: str,
    name: str,
    namespace: str,
    children: Sequence[Node] = (),
    *,
    optional: bool = False,
) -> Node:
    group, kind, dependency = _RESOURCES[resource]
    node: Node = {
        "objectReference": {
            "apiGroup": group,
            "kind": kind,
            "name": name,
            "namespace": namespace,
        },
        "labels": {DEPENDENCY_LABEL: dependency},
    }
    if children:
        node["children"] = list(children)
    if optional:
        node["optional"] = True
    return node


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _name(value: object, key: str = "name") -> str:
    found = _map(value).get(key)
    return found if isinstance(found, str) else ""


def launcher_pod_name(vmi_name: str, pods: Sequence[Mapping[str, Any]]) -> str | None:
    """The launcher pod of VMI `vmi_name` among `pods` (upstream: owner, else annotation)."""
    for pod in pods:
        meta = _map(pod.get("metadata"))
        owners = _list(meta.get("ownerReferences"))
        if any(
            o.get("kind") == "VirtualMachineInstance" and o.get("name") == vmi_name for o in owners
        ):
            return _name(meta)
        if _map(meta.get("annotations")).get("kubevirt.io/domain") == vmi_name:
            return _name(meta)
    return None


def _volume_nodes(spec: Mapping[str, Any], namespace: str) -> list[Node]:
    nodes: list[Node] = []
    for volume in _list(spec.get("volumes")):
        if "dataVolume" in volume:
            name = _name(volume.get("dataVolume"))
            pvc = _node("persistentvolumeclaims", name, namespace)
            nodes.append(_node("datavolumes", name, namespace, [pvc]))
        elif "persistentVolumeClaim" in volume:
            name = _name(volume.get("persistentVolumeClaim"), "claimName")
            nodes.append(_node("persistentvolumeclaims", name, namespace))
        elif "configMap" in volume:
            nodes.append(_node("configmaps", _name(volume.get("configMap")), namespace))
        elif "secret" in volume:
            name = _name(volume.get("secret"), "secretName")
            nodes.append(_node("secrets", name, namespace))
        elif "serviceAccount" in volume:
            name = _name(volume.get("serviceAccount"), "serviceAccountName")
            nodes.append(_node("serviceaccounts", name, namespace))
        else:
            for source in ("cloudInitNoCloud", "cloudInitConfigDrive"):
                cloud_init = _map(volume.get(source))
                for ref in ("userDataSecretRef", "networkDataSecretRef"):
                    if ref in cloud_init:
                        nodes.append(_node("secrets", _name(cloud_init.get(ref)), namespace))
    return [n for n in nodes if n["objectReference"]["name"]]


def _credential_nodes(spec: Mapping[str, Any], namespace: str) -> list[Node]:
    nodes = []
    for credential in _list(spec.get("accessCredentials")):
        for kind in ("sshPublicKey", "userPassword"):
            secret = _map(_map(_map(credential.get(kind)).get("source")).get("secret"))
            if secret.get("secretName"):
                nodes.append(_node("secrets", str(secret["secretName"]), namespace))
                break
    return nodes


def _network_nodes(spec: Mapping[str, Any], namespace: str) -> list[Node]:
    nodes = []
    for network in _list(spec.get("networks")):
        name = _name(network.get("multus"), "networkName")
        if name:
            nad_namespace, _, nad = name.rpartition("/")
            nodes.append(
                _node(
                    "networkattachmentdefinitions",
                    nad,
                    nad_namespace or namespace,
                    optional=True,
                )
            )
    return nodes


def _matcher_nodes(
    matcher: Mapping[str, Any], ref: Mapping[str, Any], namespace: str, default_kind: str
) -> list[Node]:
    if not matcher:
        return []
    resource = (str(matcher.get("kind") or default_kind)).lower() + "s"
    nodes: list[Node] = []
    if resource in _RESOURCES:
        cluster_scoped = "cluster" in resource
        nodes.append(
            _node(resource, _name(matcher), "" if cluster_scoped else namespace, optional=True)
        )
    revision = _name(ref.get("controllerRevisionRef")) if ref else _name(matcher, "revisionName")
    if revision:
        nodes.append(_node("controllerrevisions", revision, namespace))
    return nodes


def _spec_nodes(spec: Mapping[str, Any], namespace: str) -> list[Node]:
    return [
        *_credential_nodes(spec, namespace),
        *_volume_nodes(spec, namespace),
        *_network_nodes(spec, namespace),
    ]


def vmi_graph(vmi: Mapping[str, Any], launcher_pod: str | None) -> Node:
    """The graph of a VMI: its launcher pod, credentials, volumes and networks."""
    meta = _map(vmi.get("metadata"))
    name, namespace = _name(meta), _name(meta, "namespace")
    children = [_node("pods", launcher_pod, namespace)] if launcher_pod else []
    children += _spec_nodes(_map(vmi.get("spec")), namespace)
    return _node("virtualmachineinstances", name, namespace, children)


def vm_graph(vm: Mapping[str, Any], launcher_pod: str | None) -> Node:
    """The graph of a VM: its VMI (with pod) when created, instancetype, preference, the rest."""
    meta = _map(vm.get("metadata"))
    name, namespace = _name(meta), _name(meta, "namespace")
    spec = _map(vm.get("spec"))
    status = _map(vm.get("status"))
    children: list[Node] = []
    if status.get("created") is True:
        pod = [_node("pods", launcher_pod, namespace)] if launcher_pod else []
        children.append(_node("virtualmachineinstances", name, namespace, pod))
    children += _matcher_nodes(
        _map(spec.get("instancetype")),
        _map(status.get("instancetypeRef")),
        namespace,
        "VirtualMachineClusterInstancetype",
    )
    children += _matcher_nodes(
        _map(spec.get("preference")),
        _map(status.get("preferenceRef")),
        namespace,
        "VirtualMachineClusterPreference",
    )
    children += _spec_nodes(_map(_map(spec.get("template")).get("spec")), namespace)
    return _node("virtualmachines", name, namespace, children)


def graph_options(body: Mapping[str, Any]) -> tuple[bool, Mapping[str, str]]:
    """(includeOptionalNodes, labelSelector.matchLabels) of an ObjectGraphOptions body."""
    include = body.get("includeOptionalNodes", True)
    if not isinstance(include, bool):
        raise GraphOptionsError("includeOptionalNodes must be a boolean")
    selector = body.get("labelSelector") or {}
    if not isinstance(selector, Mapping):
        raise GraphOptionsError("labelSelector must be an object")
    if selector.get("matchExpressions"):
        raise GraphOptionsError("labelSelector.matchExpressions is not supported; use matchLabels")
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        raise GraphOptionsError("labelSelector.matchLabels must map label names to strings")
    return include, dict(labels)


def filter_graph(root: Node, include_optional: bool, match_labels: Mapping[str, str]) -> Node:
    """`root` with children (at any depth) left out as upstream's options say; root stays."""

    def keep(node: Node) -> bool:
        if node.get("optional") and not include_optional:
            return False
        labels = node.get("labels") or {}
        return all(labels.get(k) == v for k, v in match_labels.items())

    def prune(nodes: Sequence[Node]) -> list[Node]:
        kept = []
        for node in nodes:
            if keep(node):
                copy = dict(node)
                if "children" in copy:
                    copy["children"] = prune(copy["children"])
                kept.append(copy)
        return kept

    pruned = dict(root)
    if "children" in pruned:
        pruned["children"] = prune(pruned["children"])
    return pruned
