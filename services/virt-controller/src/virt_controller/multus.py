"""Multus networks of a VMI: the launcher pod's annotations and the NADs they need.

Upstream (`pkg/network/multus`, `pkg/network/pod/annotations`): the pod asks Multus for
one attachment per secondary Multus network in `k8s.v1.cni.cncf.io/networks`, a JSON
list in spec.networks order of `{name, namespace, mac?, interface}` (the interface named
by the hashed name scheme, `virt_domain.namescheme`); a Multus network marked `default`
replaces the pod's cluster network through `v1.multus-cni.io/default-network`. Networks
whose interface is `absent` are left out.

Before creating the pod, upstream reads each referenced NetworkAttachmentDefinition and
fails the render when one is missing (Synchronized=False, FailedCreate): a pod whose
attachments Multus cannot resolve would hang in ContainerCreating instead.
:func:`missing_attachment` does that read here, and tells a cluster without Multus at
all from one without that NAD.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kube_runtime import ApiError, KubeClient
from kubevirt_api import VirtualMachineInstance
from kubevirt_api.models import Network
from kubevirt_api.resources import Resource
from virt_domain.namescheme import pod_interface_names

__all__ = [
    "DEFAULT_NETWORK_ANNOTATION",
    "NETWORKS_ANNOTATION",
    "NETWORK_ATTACHMENT_DEFINITIONS",
    "NetworkAttachment",
    "attachments",
    "missing_attachment",
    "network_annotations",
]

NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
DEFAULT_NETWORK_ANNOTATION = "v1.multus-cni.io/default-network"
NETWORK_ATTACHMENT_DEFINITIONS = Resource(
    "k8s.cni.cncf.io", "v1", "network-attachment-definitions", "NetworkAttachmentDefinition"
)


@dataclass(frozen=True, slots=True)
class NetworkAttachment:
    """One VMI network on Multus: its NetworkAttachmentDefinition and its index."""

    network: str
    index: int
    namespace: str
    name: str
    default: bool

    @property
    def field(self) -> str:
        return f"spec.networks[{self.index}].multus.networkName"

    @property
    def qualified(self) -> str:
        return f"{self.namespace}/{self.name}"


def _nad(namespace: str, network_name: str) -> tuple[str, str]:
    """`<ns>/<name>` names another namespace's NAD; a bare name is the VMI's namespace."""
    if "/" in network_name:
        other, _, name = network_name.partition("/")
        return other, name
    return namespace, network_name


def _attached(vmi: VirtualMachineInstance) -> list[tuple[int, Network]]:
    """spec.networks (with their index) that have an interface not `absent`, as upstream."""
    present = {i.name for i in vmi.spec.domain.devices.interfaces or () if i.state != "absent"}
    return [
        (index, network)
        for index, network in enumerate(vmi.spec.networks or ())
        if network.name in present
    ]


def attachments(vmi: VirtualMachineInstance) -> list[NetworkAttachment]:
    """The attached Multus networks in spec order (secondary and default alike)."""
    namespace = (vmi.metadata.namespace if vmi.metadata else None) or "default"
    found = []
    for index, network in _attached(vmi):
        if network.multus is None:
            continue
        nad_namespace, nad_name = _nad(namespace, network.multus.network_name)
        found.append(
            NetworkAttachment(
                network.name, index, nad_namespace, nad_name, bool(network.multus.default)
            )
        )
    return found


def network_annotations(vmi: VirtualMachineInstance) -> dict[str, str]:
    """The launcher pod's Multus annotations (none when the VMI uses no Multus network)."""
    networks = vmi.spec.networks or ()
    pod_interfaces = pod_interface_names(networks)
    macs = {i.name: i.mac_address for i in vmi.spec.domain.devices.interfaces or ()}
    selections = []
    for attachment in attachments(vmi):
        if attachment.default:
            continue
        # Go's encoding of upstream's NetworkSelectionElement: this key order, compact.
        selection = {"name": attachment.name, "namespace": attachment.namespace}
        mac = macs.get(attachment.network)
        if mac:
            selection["mac"] = mac
        selection["interface"] = pod_interfaces[attachment.network]
        selections.append(selection)
    annotations = {}
    if selections:
        annotations[NETWORKS_ANNOTATION] = json.dumps(selections, separators=(",", ":"))
    default = next((n.multus for n in networks if n.multus and n.multus.default), None)
    if default is not None:
        # As upstream: the networkName as written (`<ns>/<name>` or a bare name).
        annotations[DEFAULT_NETWORK_ANNOTATION] = default.network_name
    return annotations


async def missing_attachment(client: KubeClient, vmi: VirtualMachineInstance) -> str | None:
    """Why the VMI's Multus networks cannot be attached, or None when every NAD exists.

    Other API errors (a timeout, a 5xx) are raised for the caller's retry.
    """
    for attachment in attachments(vmi):
        try:
            await client.get(NETWORK_ATTACHMENT_DEFINITIONS, attachment.name, attachment.namespace)
            continue
        except ApiError as exc:
            if exc.status == 403:
                return (
                    f"virt-controller may not read NetworkAttachmentDefinition "
                    f"{attachment.qualified} (network {attachment.network!r}, "
                    f"{attachment.field}): {exc.message or exc}"
                )
            if not exc.not_found:
                raise
        if not await _multus_installed(client):
            return (
                f"Multus ({NETWORK_ATTACHMENT_DEFINITIONS.group} NetworkAttachmentDefinition) "
                f"is not installed in this cluster: network {attachment.network!r} "
                f"({attachment.field}) cannot be attached"
            )
        return (
            f"failed to locate network attachment definition {attachment.qualified}: "
            f"network {attachment.network!r} ({attachment.field}) cannot be attached; "
            f"create the NetworkAttachmentDefinition or fix the networkName"
        )
    return None


async def _multus_installed(client: KubeClient) -> bool:
    """Whether the API server serves k8s.cni.cncf.io/v1 (the NAD CRD is installed)."""
    group = NETWORK_ATTACHMENT_DEFINITIONS
    try:
        await client.request(
            "GET", f"/apis/{group.group}/{group.version}", verb="get", resource="discovery"
        )
    except ApiError as exc:
        if exc.not_found:
            return False
        raise
    return True
