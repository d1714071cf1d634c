"""A VMI with a cloudInitNoCloud volume boots with its cidata disk in place.

The launcher writes the ISO from the VMI and the Secret files mounted in its private
dir (laid out here as kubelet does) before libvirt defines the domain; QEMU opens it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from grpclib import GRPCError
from grpclib.const import Status
from virt_domain import read_iso
from virt_rpc import DomainState, GetDomainRequest, SyncOptions, SyncVirtualMachineRequest

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIntegrationKey test@launcher"


def _vmi(launcher: Any) -> dict[str, Any]:
    body: dict[str, Any] = launcher.vmi_with_keys("my-keys", {"noCloud": {}})
    return body


def _mount_keys(launcher: Any) -> None:
    launcher.mount_access_secret("my-keys", {"key": KEY + "\n"})


def _request(launcher: Any, body: dict[str, Any]) -> SyncVirtualMachineRequest:
    return SyncVirtualMachineRequest(
        vmi=launcher.ref, vmi_json=json.dumps(body), options=SyncOptions(use_emulation=True)
    )


async def test_a_cloud_init_vmi_boots_with_its_cidata_disk(
    launcher_control: tuple[Callable[..., Any], Callable[..., Any]],
    serial_reader: Callable[..., Any],
    tiny_guest: Any,
) -> None:
    start, _stop = launcher_control
    launcher = await start()
    body = _vmi(launcher)

    # The key's Secret is not mounted yet: refused with the field, nothing defined.
    with pytest.raises(GRPCError) as refused:
        await launcher.cmd.sync_virtual_machine(_request(launcher, body))
    assert refused.value.status is Status.INVALID_ARGUMENT
    assert "spec.accessCredentials[0].sshPublicKey.source.secret" in str(refused.value.message)
    assert (await launcher.cmd.get_domain(GetDomainRequest())).domain is None

    await asyncio.to_thread(_mount_keys, launcher)
    reply = await launcher.cmd.sync_virtual_machine(_request(launcher, body))
    assert reply.domain.state == DomainState.RUNNING
    await serial_reader(launcher.serial_socket, tiny_guest.marker)

    iso = launcher.private_dir / "cloud-init" / "default" / "tiny" / "noCloud.iso"
    domain = await launcher.cmd.get_domain(GetDomainRequest())
    assert str(iso) in domain.domain.domain_xml
    held = read_iso(await asyncio.to_thread(iso.read_bytes))
    assert held.label == "cidata"
    assert held.files["user-data"] == b"#cloud-config\nhostname: t\n"
    assert json.loads(held.files["meta-data"])["public-keys"] == {"0": KEY}
