"""VMI network rules: networks, interfaces, their bindings and models."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..clusterconfig import ClusterConfig
from ..values import as_list, as_map, as_str
from .causes import Cause, CauseType, FieldPath

__all__ = ["check_networks", "has_pod_network"]

INTERFACE_MODELS = ("e1000", "e1000e", "ne2k_pci", "pcnet", "rtl8139", "virtio")
BINDINGS = ("bridge", "masquerade", "sriov", "passtBinding", "slirp", "macvtap", "passt", "binding")
# Core bindings upstream discontinued in v1.3 in favour of network binding plugins.
DISCONTINUED_BINDINGS = ("slirp", "macvtap", "passt")
NETWORK_SOURCES = ("pod", "multus")
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")
_PCI = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[01][0-9a-fA-F]\.[0-7]$")
_IFACE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def has_pod_network(spec: Mapping[str, Any]) -> bool:
    """Whether the spec declares a pod network."""
    return any("pod" in as_map(n) for n in as_list(spec.get("networks")))


def check_networks(spec: Mapping[str, Any], path: FieldPath, config: ClusterConfig) -> list[Cause]:
    """Networks and interfaces pair up by name; bindings and models are valid for them."""
    causes: list[Cause] = []
    npath = path.child("networks")
    ipath = path.child("domain", "devices", "interfaces")
    networks = as_list(spec.get("networks"))
    interfaces = as_list(as_map(as_map(spec.get("domain")).get("devices")).get("interfaces"))

    by_name: dict[str, Mapping[str, Any]] = {}
    pod_seen: FieldPath | None = None
    default_seen: FieldPath | None = None
    for i, raw in enumerate(networks):
        network = as_map(raw)
        field = npath.index(i)
        name = as_str(network.get("name"))
        if not name:
            causes.append(
                Cause(str(field.child("name")), "a network needs a name", CauseType.REQUIRED)
            )
        elif name in by_name:
            causes.append(
                Cause(
                    str(field.child("name")),
                    f"network name '{name}' is used twice; network names must be unique",
                    CauseType.DUPLICATE,
                )
            )
        else:
            by_name[name] = network
        sources = [s for s in NETWORK_SOURCES if s in network]
        if len(sources) != 1:
            causes.append(
                Cause(
                    str(field),
                    f"a network needs exactly one of pod or multus; found {', '.join(sources) or 'none'}",
                )
            )
        if "pod" in network:
            if pod_seen is not None:
                causes.append(
                    Cause(
                        str(field.child("pod")),
                        f"only one pod network is allowed and {pod_seen} is already one",
                    )
                )
            else:
                pod_seen = field
        if as_map(network.get("multus")).get("default") is True:
            # The Multus default network replaces the pod's cluster network (its eth0).
            if default_seen is not None:
                causes.append(
                    Cause(
                        str(field.child("multus", "default")),
                        f"Multus CNI should only have one default network; {default_seen} is "
                        "already one",
                    )
                )
            else:
                default_seen = field
        if "multus" in network and not as_str(as_map(network.get("multus")).get("networkName")):
            causes.append(
                Cause(
                    str(field.child("multus", "networkName")),
                    "multus needs the networkName of a NetworkAttachmentDefinition",
                    CauseType.REQUIRED,
                )
            )

    if pod_seen is not None and default_seen is not None:
        causes.append(
            Cause(
                str(npath),
                f"pod network cannot be defined when a Multus default network is defined "
                f"({pod_seen} and {default_seen}); keep one of them",
            )
        )

    seen_ifaces: set[str] = set()
    for i, raw in enumerate(interfaces):
        iface = as_map(raw)
        field = ipath.index(i)
        name = as_str(iface.get("name"))
        if not name:
            causes.append(
                Cause(str(field.child("name")), "an interface needs a name", CauseType.REQUIRED)
            )
            continue
        if name in seen_ifaces:
            causes.append(
                Cause(
                    str(field.child("name")),
                    f"interface name '{name}' is used twice; interface names must be unique",
                    CauseType.DUPLICATE,
                )
            )
        seen_ifaces.add(name)
        iface_network = by_name.get(name)
        if iface_network is None:
            causes.append(
                Cause(
                    str(field.child("name")),
                    f"interface '{name}' has no network of that name in {npath}; "
                    "add a network with the same name",
                )
            )
        bindings = [b for b in BINDINGS if b in iface]
        if len(bindings) > 1:
            causes.append(
                Cause(
                    str(field),
                    f"an interface may use only one binding method; found {', '.join(bindings)}",
                )
            )
        if "masquerade" in bindings and iface_network is not None and "pod" not in iface_network:
            causes.append(
                Cause(
                    str(field.child("masquerade")),
                    "masquerade is only allowed on the pod network; use bridge or sriov for "
                    f"network '{name}'",
                )
            )
        if "sriov" in bindings and iface_network is not None and "multus" not in iface_network:
            causes.append(
                Cause(
                    str(field.child("sriov")),
                    f"SR-IOV interfaces need a multus network; network '{name}' is not one",
                )
            )
        for binding in bindings:
            if binding in DISCONTINUED_BINDINGS:
                causes.append(
                    Cause(
                        str(field.child(binding)),
                        f"the {binding} binding was discontinued in KubeVirt v1.3; use a network "
                        "binding plugin (binding: {name: ...}) or bridge/masquerade",
                    )
                )
        if (
            "bridge" in bindings
            and iface_network is not None
            and "pod" in iface_network
            and not config.permit_bridge_on_pod_network
        ):
            causes.append(
                Cause(
                    str(field.child("bridge")),
                    "bridge on the pod network is disabled in the KubeVirt CR "
                    "(spec.configuration.network.permitBridgeInterfaceOnPodNetwork); use masquerade",
                )
            )
        if "binding" in iface and not as_str(as_map(iface.get("binding")).get("name")):
            causes.append(
                Cause(
                    str(field.child("binding", "name")),
                    "a binding plugin needs a name",
                    CauseType.REQUIRED,
                )
            )
        model = as_str(iface.get("model"))
        if model is not None and model not in INTERFACE_MODELS:
            causes.append(
                Cause(
                    str(field.child("model")),
                    f"interface model '{model}' is not supported; use one of {', '.join(INTERFACE_MODELS)}",
                    CauseType.NOT_SUPPORTED,
                )
            )
        if not _IFACE_NAME.match(name):
            causes.append(
                Cause(
                    str(field.child("name")),
                    f"interface name '{name}' may only contain letters, digits, '-' and '_'",
                )
            )
        mac = as_str(iface.get("macAddress"))
        if mac is not None and not _MAC.match(mac):
            causes.append(
                Cause(
                    str(field.child("macAddress")),
                    f"'{mac}' is not a MAC address such as 02:00:00:00:00:01",
                )
            )
        pci = as_str(iface.get("pciAddress"))
        if pci is not None and not _PCI.match(pci):
            causes.append(
                Cause(
                    str(field.child("pciAddress")),
                    f"'{pci}' is not a PCI address such as 0000:81:01.0",
                )
            )
        if iface_network is not None and "pod" in iface_network:
            causes.extend(_check_ports(iface, field))

    for i, raw in enumerate(networks):
        name = as_str(as_map(raw).get("name"))
        if name and name not in seen_ifaces:
            causes.append(
                Cause(
                    str(npath.index(i).child("name")),
                    f"network '{name}' has no interface of that name in {ipath}; add one",
                )
            )
    return causes


def _check_ports(iface: Mapping[str, Any], field: FieldPath) -> list[Cause]:
    """Forwarded ports of a pod-network interface: a number, a protocol, unique valid names."""
    causes: list[Cause] = []
    names: set[str] = set()
    for j, raw in enumerate(as_list(iface.get("ports"))):
        port = as_map(raw)
        pfield = field.child("ports").index(j)
        number = port.get("port")
        if number is None or number == 0:
            causes.append(
                Cause(str(pfield.child("port")), "port is required (1-65535)", CauseType.REQUIRED)
            )
        elif not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 65536:
            causes.append(Cause(str(pfield.child("port")), "port must be between 1 and 65535"))
        protocol = as_str(port.get("protocol"))
        if protocol is not None and protocol not in ("TCP", "UDP"):
            causes.append(
                Cause(
                    str(pfield.child("protocol")),
                    f"protocol '{protocol}' is not supported; use TCP or UDP",
                    CauseType.NOT_SUPPORTED,
                )
            )
        name = as_str(port.get("name"))
        if name:
            if name in names:
                causes.append(
                    Cause(
                        str(pfield.child("name")),
                        f"port name '{name}' is used twice",
                        CauseType.DUPLICATE,
                    )
                )
            names.add(name)
            if (
                len(name) > 15
                or not _PORT_NAME.match(name)
                or "--" in name
                or not any(c.isalpha() for c in name)
            ):
                causes.append(
                    Cause(
                        str(pfield.child("name")),
                        f"port name '{name}' must be an IANA service name: at most 15 lower-case "
                        "letters, digits and single '-', with at least one letter",
                    )
                )
    return causes
