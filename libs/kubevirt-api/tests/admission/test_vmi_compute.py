"""VMI create: memory, hugepages, CPU, firmware, DNS and hostname."""

from __future__ import annotations

from typing import Any

from kubevirt_api.admission import ClusterConfig, validate_vmi_create


def fields(vmi: dict[str, Any]) -> dict[str, str]:
    got: dict[str, str] = {}
    for c in validate_vmi_create(vmi, ClusterConfig()):
        got[c.field] = f"{got.get(c.field, '')} {c.message}".strip()
    return got


def test_memory_must_be_requested(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["resources"] = {}
    assert "no memory requested" in fields(vmi)["spec.domain.resources.requests.memory"]


def test_memory_at_least_1m_and_well_formed(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["resources"]["requests"]["memory"] = "512k"
    assert "at least 1M" in fields(vmi)["spec.domain.resources.requests.memory"]
    vmi["spec"]["domain"]["resources"]["requests"]["memory"] = "1Gx"
    assert "not a quantity" in fields(vmi)["spec.domain.resources.requests.memory"]


def test_requests_above_limits_and_guest_above_limit(vmi: dict[str, Any]) -> None:
    domain = vmi["spec"]["domain"]
    domain["resources"] = {
        "requests": {"memory": "2Gi", "cpu": "2"},
        "limits": {"memory": "1Gi", "cpu": "1"},
    }
    domain["memory"] = {"guest": "3Gi"}
    got = fields(vmi)
    assert "exceeds the limit" in got["spec.domain.resources.requests.memory"]
    assert "exceeds the limit" in got["spec.domain.resources.requests.cpu"]
    assert "exceeds the memory limit" in got["spec.domain.memory.guest"]


def test_hugepages_size_and_multiple(vmi: dict[str, Any]) -> None:
    domain = vmi["spec"]["domain"]
    domain["memory"] = {"hugepages": {"size": "3Mi"}}
    assert "2Mi" in fields(vmi)["spec.domain.memory.hugepages.size"]
    domain["memory"] = {"hugepages": {"size": "1Gi"}}
    domain["resources"]["requests"]["memory"] = "1536Mi"
    assert "multiple" in fields(vmi)["spec.domain.resources.requests.memory"]


def test_dedicated_cpus_rules(vmi: dict[str, Any]) -> None:
    domain = vmi["spec"]["domain"]
    domain["cpu"] = {"dedicatedCpuPlacement": True, "cores": 2}
    domain["resources"]["requests"]["cpu"] = "1500m"
    domain["resources"]["limits"] = {"cpu": "2"}
    got = fields(vmi)
    assert "must equal the CPU limit" in got["spec.domain.resources.requests.cpu"]
    assert "spec.domain.cpu" in got


def test_isolate_emulator_thread_needs_dedicated(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["cpu"] = {"isolateEmulatorThread": True, "cores": 0}
    got = fields(vmi)
    assert "dedicatedCpuPlacement" in got["spec.domain.cpu.isolateEmulatorThread"]
    assert "at least 1" in got["spec.domain.cpu.cores"]


def test_bios_xor_efi_and_secure_boot_needs_smm(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["firmware"] = {"bootloader": {"bios": {}, "efi": {}}}
    got = fields(vmi)
    assert "only one of bios or efi" in got["spec.domain.firmware.bootloader"]
    assert "SMM" in got["spec.domain.firmware.bootloader.efi.secureBoot"]
    vmi["spec"]["domain"]["firmware"] = {"bootloader": {"efi": {"secureBoot": True}}}
    vmi["spec"]["domain"]["features"] = {"smm": {"enabled": True}}
    assert validate_vmi_create(vmi, ClusterConfig()) == []


def test_kernel_boot_rules(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["firmware"] = {
        "kernelBoot": {"kernelArgs": "console=ttyS0", "container": {"initrdPath": "boot/../initrd"}}
    }
    got = fields(vmi)
    assert "kernelPath" in got["spec.domain.firmware.kernelBoot.kernelArgs"]
    assert "image" in got["spec.domain.firmware.kernelBoot.container.image"]
    assert "absolute" in got["spec.domain.firmware.kernelBoot.container.initrdPath"]


def test_dns_and_hostname(vmi: dict[str, Any]) -> None:
    vmi["spec"]["hostname"] = "-bad-"
    vmi["spec"]["dnsPolicy"] = "None"
    vmi["spec"]["dnsConfig"] = {"searches": ["a"] * 7}
    got = fields(vmi)
    assert "DNS label" in got["spec.hostname"]
    assert "nameserver" in got["spec.dnsConfig.nameservers"]
    assert "at most 6" in got["spec.dnsConfig.searches"]


def test_feature_gates_come_from_the_kubevirt_cr(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["devices"]["gpus"] = [{"name": "gpu1", "deviceName": "nvidia.com/X"}]
    assert "GPU feature gate" in fields(vmi)["spec.domain.devices.gpus"]
    kubevirt = {
        "spec": {
            "configuration": {
                "developerConfiguration": {"featureGates": ["GPU"]},
                "permittedHostDevices": {"pciHostDevices": [{"resourceName": "nvidia.com/X"}]},
            }
        }
    }
    assert validate_vmi_create(vmi, ClusterConfig.from_kubevirt(kubevirt)) == []


def test_realtime_needs_dedicated_cpus_and_numa(vmi: dict[str, Any]) -> None:
    vmi["spec"]["domain"]["cpu"] = {"realtime": {}}
    message = fields(vmi)["spec.domain.cpu.realtime"]
    assert "dedicatedCpuPlacement" in message
    assert "guestMappingPassthrough" in message


def test_access_credentials(vmi: dict[str, Any]) -> None:
    vmi["spec"]["accessCredentials"] = [
        {
            "sshPublicKey": {
                "source": {"secret": {"secretName": "keys"}},
                "propagationMethod": {"noCloud": {}},
            }
        },
        {"sshPublicKey": {}, "userPassword": {}},
    ]
    got = fields(vmi)
    assert (
        "cloudInitNoCloud volume"
        in got["spec.accessCredentials[0].sshPublicKey.propagationMethod.noCloud"]
    )
    assert "exactly one" in got["spec.accessCredentials[1]"]
