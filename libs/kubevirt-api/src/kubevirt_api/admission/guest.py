"""VMI rules about the guest's identity and surroundings: hostname, DNS, probes, devices."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from ..clusterconfig import ClusterConfig
from ..values import as_bool, as_int, as_list, as_map, as_str
from .causes import Cause, CauseType, FieldPath
from .network import has_pod_network

__all__ = ["check_guest", "is_dns_label", "is_dns_subdomain"]

DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
MAX_NAMESERVERS = 3
MAX_SEARCH_PATHS = 6
MAX_SEARCH_CHARS = 256
PROBE_HANDLERS = ("httpGet", "tcpSocket", "exec", "guestAgentPing")
EVICTION_STRATEGIES = ("None", "LiveMigrate", "LiveMigrateIfPossible", "External")
SOUND_MODELS = ("ich9", "ac97")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def is_dns_label(value: str) -> bool:
    """RFC 1123 label: at most 63 lower-case alphanumerics or '-', alphanumeric at both ends."""
    return len(value) <= 63 and bool(_LABEL.match(value))


def is_dns_subdomain(value: str) -> bool:
    """RFC 1123 subdomain: dot-separated labels, at most 253 characters."""
    return 0 < len(value) <= 253 and all(is_dns_label(part) for part in value.split("."))


def check_guest(spec: Mapping[str, Any], path: FieldPath, config: ClusterConfig) -> list[Cause]:
    """Hostname, DNS, probes, lifecycle settings and gated devices."""
    causes: list[Cause] = []
    hostname = spec.get("hostname")
    if hostname is not None and not (isinstance(hostname, str) and is_dns_label(hostname)):
        causes.append(
            Cause(
                str(path.child("hostname")),
                f"hostname '{hostname}' must be a DNS label: at most 63 lower-case letters, digits "
                "or '-', starting and ending with a letter or digit",
            )
        )
    subdomain = spec.get("subdomain")
    if subdomain is not None and not (isinstance(subdomain, str) and is_dns_subdomain(subdomain)):
        causes.append(
            Cause(
                str(path.child("subdomain")),
                f"subdomain '{subdomain}' must be a DNS subdomain: dot-separated DNS labels",
            )
        )
    _check_dns(spec, path, causes)
    for probe in ("readinessProbe", "livenessProbe"):
        if probe in spec:
            _check_probe(spec, as_map(spec.get(probe)), path.child(probe), causes)
    strategy = as_str(spec.get("startStrategy"))
    if strategy is not None:
        if strategy != "Paused":
            causes.append(
                Cause(
                    str(path.child("startStrategy")),
                    f"startStrategy '{strategy}' is not supported; the only value is Paused",
                    CauseType.NOT_SUPPORTED,
                )
            )
        elif "livenessProbe" in spec:
            causes.append(
                Cause(
                    str(path.child("startStrategy")),
                    "startStrategy Paused cannot be used with a livenessProbe",
                )
            )
    eviction = as_str(spec.get("evictionStrategy"))
    if eviction is not None and eviction not in EVICTION_STRATEGIES:
        causes.append(
            Cause(
                str(path.child("evictionStrategy")),
                f"evictionStrategy '{eviction}' is not supported; use one of {', '.join(EVICTION_STRATEGIES)}",
                CauseType.NOT_SUPPORTED,
            )
        )
    grace = spec.get("terminationGracePeriodSeconds")
    grace_int = as_int(grace)
    if grace is not None and (grace_int is None or grace_int < 0):
        causes.append(
            Cause(
                str(path.child("terminationGracePeriodSeconds")), "must be an integer of at least 0"
            )
        )
    _check_devices(spec, path, config, causes)
    _check_access_credentials(spec, path, causes)
    return causes


def _check_access_credentials(
    spec: Mapping[str, Any], path: FieldPath, causes: list[Cause]
) -> None:
    """One credential type each; a propagation method needs its cloud-init volume."""
    volumes = [as_map(v) for v in as_list(spec.get("volumes"))]
    has = {
        "noCloud": any("cloudInitNoCloud" in v for v in volumes),
        "configDrive": any("cloudInitConfigDrive" in v for v in volumes),
    }
    volume_for = {"noCloud": "cloudInitNoCloud", "configDrive": "cloudInitConfigDrive"}
    for i, raw in enumerate(as_list(spec.get("accessCredentials"))):
        credential = as_map(raw)
        field = path.child("accessCredentials").index(i)
        kinds = [k for k in ("sshPublicKey", "userPassword") if k in credential]
        if len(kinds) != 1:
            causes.append(
                Cause(
                    str(field),
                    "an access credential needs exactly one of sshPublicKey or userPassword; "
                    f"found {', '.join(kinds) or 'none'}",
                )
            )
            continue
        kind = kinds[0]
        body = as_map(credential.get(kind))
        if not as_str(as_map(as_map(body.get("source")).get("secret")).get("secretName")):
            causes.append(
                Cause(
                    str(field.child(kind, "source", "secret", "secretName")),
                    "the credential needs a source secret name",
                    CauseType.REQUIRED,
                )
            )
        methods = as_map(body.get("propagationMethod"))
        if not methods:
            causes.append(
                Cause(
                    str(field.child(kind, "propagationMethod")),
                    "a propagation method is required (qemuGuestAgent, noCloud or configDrive)",
                    CauseType.REQUIRED,
                )
            )
        for method, volume in volume_for.items():
            if method in methods and not has[method]:
                causes.append(
                    Cause(
                        str(field.child(kind, "propagationMethod", method)),
                        f"the {method} propagation method needs a {volume} volume in spec.volumes",
                    )
                )


def _check_dns(spec: Mapping[str, Any], path: FieldPath, causes: list[Cause]) -> None:
    policy = as_str(spec.get("dnsPolicy"))
    if policy is not None and policy not in DNS_POLICIES:
        causes.append(
            Cause(
                str(path.child("dnsPolicy")),
                f"dnsPolicy '{policy}' is not supported; use one of {', '.join(DNS_POLICIES)}",
                CauseType.NOT_SUPPORTED,
            )
        )
    cpath = path.child("dnsConfig")
    config = as_map(spec.get("dnsConfig"))
    nameservers = as_list(config.get("nameservers"))
    if policy == "None" and not nameservers:
        causes.append(
            Cause(
                str(cpath.child("nameservers")),
                "dnsPolicy None needs at least one nameserver in dnsConfig.nameservers",
                CauseType.REQUIRED,
            )
        )
    if len(nameservers) > MAX_NAMESERVERS:
        causes.append(
            Cause(
                str(cpath.child("nameservers")),
                f"at most {MAX_NAMESERVERS} nameservers are allowed",
            )
        )
    for i, server in enumerate(nameservers):
        try:
            ipaddress.ip_address(server if isinstance(server, str) else "")
        except ValueError:
            causes.append(
                Cause(str(cpath.child("nameservers").index(i)), f"'{server}' is not an IP address")
            )
    searches = as_list(config.get("searches"))
    if len(searches) > MAX_SEARCH_PATHS:
        causes.append(
            Cause(
                str(cpath.child("searches")),
                f"at most {MAX_SEARCH_PATHS} search domains are allowed",
            )
        )
    if (
        sum(len(s) for s in searches if isinstance(s, str)) + max(len(searches) - 1, 0)
        > MAX_SEARCH_CHARS
    ):
        causes.append(
            Cause(
                str(cpath.child("searches")),
                f"the search list must be at most {MAX_SEARCH_CHARS} characters long",
            )
        )
    for i, search in enumerate(searches):
        if not (isinstance(search, str) and is_dns_subdomain(search.rstrip("."))):
            causes.append(
                Cause(str(cpath.child("searches").index(i)), f"'{search}' is not a DNS subdomain")
            )
    for i, option in enumerate(as_list(config.get("options"))):
        if not as_str(as_map(option).get("name")):
            causes.append(
                Cause(
                    str(cpath.child("options").index(i).child("name")),
                    "a DNS option needs a name",
                    CauseType.REQUIRED,
                )
            )


def _check_probe(
    spec: Mapping[str, Any], probe: Mapping[str, Any], ppath: FieldPath, causes: list[Cause]
) -> None:
    handlers = [h for h in PROBE_HANDLERS if h in probe]
    if len(handlers) != 1:
        causes.append(
            Cause(
                str(ppath),
                f"a probe needs exactly one of {', '.join(PROBE_HANDLERS)}; found {', '.join(handlers) or 'none'}",
            )
        )
    if any(h in probe for h in ("httpGet", "tcpSocket")) and not has_pod_network(spec):
        causes.append(
            Cause(
                str(ppath),
                "httpGet and tcpSocket probes need a pod network; use exec or guestAgentPing",
            )
        )
    for key in (
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ):
        if key in probe:
            value = as_int(probe.get(key))
            if value is None or value < 0:
                causes.append(
                    Cause(str(ppath.child(key)), f"{key} must be an integer of at least 0")
                )


# Devices behind a feature gate: (devices key, gate).
_GATED_DEVICES = (
    ("gpus", "GPU"),
    ("hostDevices", "HostDevices"),
    ("filesystems", "ExperimentalVirtiofsSupport"),
    ("downwardMetrics", "DownwardMetrics"),
    ("video", "VideoConfig"),
    ("panicDevices", "PanicDevices"),
)


def _check_devices(
    spec: Mapping[str, Any], path: FieldPath, config: ClusterConfig, causes: list[Cause]
) -> None:
    dpath = path.child("domain", "devices")
    devices = as_map(as_map(spec.get("domain")).get("devices"))
    for key, gate in _GATED_DEVICES:
        present = devices.get(key)
        if present is not None and present != [] and not config.gate(gate):
            if key == "filesystems" and config.gate("EnableVirtioFsConfigVolumes"):
                continue
            causes.append(
                Cause(
                    str(dpath.child(key)),
                    f"{key} need the {gate} feature gate; enable it in the KubeVirt CR "
                    "spec.configuration.developerConfiguration.featureGates",
                    CauseType.FORBIDDEN,
                )
            )
    for key in ("gpus", "hostDevices"):
        for i, raw in enumerate(as_list(devices.get(key))):
            device = as_map(raw)
            name = as_str(device.get("deviceName"))
            field = dpath.child(key).index(i)
            if not as_str(device.get("name")):
                causes.append(
                    Cause(str(field.child("name")), "a device needs a name", CauseType.REQUIRED)
                )
            if not name and "claimName" not in device and "claimRequest" not in device:
                causes.append(
                    Cause(
                        str(field.child("deviceName")), "deviceName is required", CauseType.REQUIRED
                    )
                )
            elif (
                name
                and config.gate("HostDevices" if key == "hostDevices" else "GPU")
                and (name not in config.permitted_host_devices)
            ):
                causes.append(
                    Cause(
                        str(field.child("deviceName")),
                        f"device '{name}' is not listed in the KubeVirt CR "
                        "spec.configuration.permittedHostDevices",
                    )
                )
    if as_bool(devices.get("autoattachVSOCK")) is True and not config.gate("VSOCK"):
        causes.append(
            Cause(
                str(dpath.child("autoattachVSOCK")),
                "VSOCK needs the VSOCK feature gate",
                CauseType.FORBIDDEN,
            )
        )
    if "sev" in as_map(as_map(spec.get("domain")).get("launchSecurity")) and not config.gate(
        "WorkloadEncryptionSEV"
    ):
        causes.append(
            Cause(
                str(path.child("domain", "launchSecurity", "sev")),
                "SEV needs the WorkloadEncryptionSEV feature gate",
                CauseType.FORBIDDEN,
            )
        )
    for i, raw in enumerate(as_list(devices.get("inputs"))):
        device = as_map(raw)
        field = dpath.child("inputs").index(i)
        bus = as_str(device.get("bus"))
        if bus not in (None, "", "virtio", "usb"):
            causes.append(
                Cause(
                    str(field.child("bus")),
                    f"input bus '{bus}' is not supported; use virtio or usb",
                    CauseType.NOT_SUPPORTED,
                )
            )
        if as_str(device.get("type")) != "tablet":
            causes.append(
                Cause(
                    str(field.child("type")),
                    "the only input device type is tablet",
                    CauseType.NOT_SUPPORTED,
                )
            )
    sound = as_map(devices.get("sound"))
    model = as_str(sound.get("model"))
    if model is not None and model not in SOUND_MODELS:
        causes.append(
            Cause(
                str(dpath.child("sound", "model")),
                f"sound model '{model}' is not supported; use ich9 or ac97",
                CauseType.NOT_SUPPORTED,
            )
        )
    if "sound" in devices and not as_str(sound.get("name")):
        causes.append(
            Cause(
                str(dpath.child("sound", "name")), "a sound device needs a name", CauseType.REQUIRED
            )
        )
    for i, raw in enumerate(as_list(spec.get("volumes"))):
        lun = None
        for disk in as_list(devices.get("disks")):
            if as_map(disk).get("name") == as_map(raw).get("name"):
                lun = as_map(as_map(disk).get("lun"))
        if (
            lun
            and as_bool(lun.get("reservation")) is True
            and not config.gate("PersistentReservation")
        ):
            causes.append(
                Cause(
                    str(path.child("volumes").index(i)),
                    "LUN reservation needs the PersistentReservation feature gate",
                    CauseType.FORBIDDEN,
                )
            )
