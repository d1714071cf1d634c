"""The guest agent in the VMI's status and subresources: conditions, guestOSInfo,
interfaces, fsFreezeStatus, and upstream's JSON shapes; Freeze/Unfreeze reach the launcher."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kube_runtime import freeze
from virt_handler import DomainView, Observation, compute_status
from virt_handler.guestagent import (
    OLD_SSH_COMMANDS,
    REQUIRED_COMMANDS,
    SSH_COMMANDS,
    access_credentials_event,
    filesystem_list,
    guest_agent_info,
    unsupported_reason,
    user_list,
)
from virt_handler.relay import relay_routes
from virt_handler.status import AccessCredentialsView, GuestNicView
from virt_handler.vmi_sync import CommandError
from virt_rpc import (
    AccessCredentialsStatus,
    DomainReason,
    DomainState,
    GuestDisk,
    GuestFilesystem,
    GuestInfo,
    GuestInterface,
    GuestOs,
    GuestUser,
)

if TYPE_CHECKING:
    from conftest import Node

NOW = "2026-12-01T10:00:00Z"
MAC = "02:00:00:00:00:01"


def _info(**extra: Any) -> GuestInfo:
    fields: dict[str, Any] = {
        "agent_connected": True,
        "agent_version": "7.2.22",
        "supported_commands": sorted(REQUIRED_COMMANDS),
        "hostname": "vm1",
        "timezone": "UTC, 0",
        "fsfreeze_status": "thawed",
        "os": GuestOs(name="kubevirt-py guest", id="kubevirt-py-guest", version_id="1"),
        "interfaces": [GuestInterface(name="eth0", mac=MAC, ip_addresses=["10.0.2.2"])],
        "users": [
            GuestUser(name="root", login_time=datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC))
        ],
        "filesystems": [
            GuestFilesystem(
                disk_name="vda1",
                mount_point="/boot",
                type="vfat",
                used_bytes=10,
                total_bytes=20,
                disks=[GuestDisk(bus_type="virtio", device="/dev/vda1")],
            )
        ],
    }
    fields.update(extra)
    return GuestInfo(**fields)


def _running(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "v"},
        "spec": {},
        "status": {
            "phase": "Running",
            "nodeName": "n",
            # LiveMigratable and migrationMethod settled: these tests are about the agent.
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "LiveMigratable", "status": "True"},
            ],
            "migrationMethod": "LiveMigration",
            **status,
        },
    }


def _obs(**agent: Any) -> Observation:
    pod = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    return Observation(node="n", domain=DomainView(DomainState.RUNNING), now=NOW, pod=pod, **agent)


def _types(patch: dict[str, Any]) -> dict[str, str]:
    conditions = patch.get("conditions", [])
    return {c["type"]: c["status"] for c in conditions if c["type"] != "LiveMigratable"}


def test_agent_connected_comes_and_goes_with_the_agent() -> None:
    connected = compute_status(_running(), _obs(agent_connected=True))
    assert _types(connected) == {"Ready": "True", "AgentConnected": "True"}
    settled = _running(conditions=connected["conditions"])
    assert compute_status(settled, _obs(agent_connected=True)) == {}  # nothing to patch
    gone = compute_status(settled, _obs(agent_connected=False))
    assert _types(gone) == {"Ready": "True"}


def test_an_agent_missing_required_commands_is_flagged_with_upstreams_reason() -> None:
    reason = "This guest agent doesn't support required basic commands"
    patch = compute_status(_running(), _obs(agent_connected=True, agent_unsupported=reason))
    unsupported = next(c for c in patch["conditions"] if c["type"] == "AgentVersionNotSupported")
    assert (unsupported["status"], unsupported["reason"]) == ("True", reason)
    settled = _running(conditions=patch["conditions"])
    fixed = compute_status(settled, _obs(agent_connected=True))
    assert "AgentVersionNotSupported" not in _types(fixed)


def test_required_commands_as_upstream_lists_them() -> None:
    assert unsupported_reason({}, sorted(REQUIRED_COMMANDS)) == ""
    assert unsupported_reason({}, []) == ""  # guest-info not answered yet
    partial = [c for c in REQUIRED_COMMANDS if c != "guest-get-users"]
    assert "basic commands" in unsupported_reason({}, partial)
    with_keys = {
        "spec": {
            "accessCredentials": [
                {
                    "sshPublicKey": {
                        "source": {"secret": {"secretName": "k"}},
                        "propagationMethod": {"qemuGuestAgent": {"users": ["root"]}},
                    }
                }
            ]
        }
    }
    assert "public key commands" in unsupported_reason(with_keys, sorted(REQUIRED_COMMANDS))
    assert unsupported_reason(with_keys, sorted(REQUIRED_COMMANDS + SSH_COMMANDS)) == ""
    # An older agent that the launcher's guest-file path can still serve (upstream's).
    assert unsupported_reason(with_keys, sorted(REQUIRED_COMMANDS + OLD_SSH_COMMANDS)) == ""


def test_fs_freeze_status_shows_frozen_and_clears_when_thawed() -> None:
    frozen = compute_status(_running(), _obs(agent_connected=True, fsfreeze_status="frozen"))
    assert frozen["fsFreezeStatus"] == "frozen"
    vmi = _running(conditions=frozen["conditions"], fsFreezeStatus="frozen")
    assert "fsFreezeStatus" not in compute_status(
        vmi, _obs(agent_connected=True, fsfreeze_status="frozen")
    )
    thawed = compute_status(vmi, _obs(agent_connected=True, fsfreeze_status="thawed"))
    assert thawed == {"fsFreezeStatus": None}  # merge patch: the field goes


def test_interfaces_gain_the_guests_name_and_addresses() -> None:
    obs = Observation(
        node="n",
        domain=DomainView(DomainState.RUNNING, interfaces=(("net2", MAC),)),
        now=NOW,
        agent_connected=True,
        guest_nics=(
            GuestNicView("eth1", MAC.upper(), ("192.168.1.5", "fe80::1")),
            GuestNicView("lo", "00:00:00:00:00:00", ("127.0.0.1",)),
            GuestNicView("dummy0", "02:00:00:00:00:99", ()),
        ),
        networks=(),
    )
    patch = compute_status(_running(), obs)
    assert patch["interfaces"] == [
        {
            "name": "net2",
            "mac": MAC,
            "infoSource": "domain, guest-agent",
            "interfaceName": "eth1",
            "ipAddress": "192.168.1.5",
            "ipAddresses": ["192.168.1.5", "fe80::1"],
        },
        {"interfaceName": "dummy0", "mac": "02:00:00:00:00:99", "infoSource": "guest-agent"},
    ]
    settled = _running(conditions=patch["conditions"], interfaces=patch["interfaces"])
    assert "interfaces" not in compute_status(settled, obs)


def test_guestosinfo_userlist_and_filesystemlist_in_upstreams_shapes() -> None:
    info = _info(fsfreeze_status="frozen")
    body = guest_agent_info(info)
    assert body["guestAgentVersion"] == "7.2.22"
    assert body["hostname"] == "vm1"
    assert body["timezone"] == "UTC, 0"
    assert body["os"] == {"name": "kubevirt-py guest", "id": "kubevirt-py-guest", "versionId": "1"}
    assert {"name": "guest-ping", "enabled": True} in body["supportedCommands"]
    assert body["fsFreezeStatus"] == "frozen"
    assert body["userList"] == [{"userName": "root", "loginTime": 1_796_083_200.0}]
    disk = {
        "diskName": "vda1",
        "mountPoint": "/boot",
        "fileSystemType": "vfat",
        "usedBytes": 10,
        "totalBytes": 20,
        "disk": [{"busType": "virtio"}],
    }
    assert body["fsInfo"] == {"disks": [disk]}
    assert user_list(info) == {"metadata": {}, "items": body["userList"]}
    assert filesystem_list(info) == {"metadata": {}, "items": [disk]}
    many = _info(users=[GuestUser(name=f"u{i}") for i in range(12)])
    assert len(guest_agent_info(many)["userList"]) == 10  # upstream shows ten
    assert len(user_list(many)["items"]) == 12
    assert "fsFreezeStatus" not in guest_agent_info(_info())


async def test_the_agents_report_from_notify_reaches_the_status_once(node: Node) -> None:
    await node.guest_running()
    before = len(node.client.status_patches())
    await node.notify(DomainState.RUNNING, DomainReason.BOOTED, guest=_info())
    await node.sync.reconcile(node.key)
    patch = node.client.status_patches()[-1]
    assert len(node.client.status_patches()) == before + 1
    assert patch["guestOSInfo"] == {
        "name": "kubevirt-py guest",
        "id": "kubevirt-py-guest",
        "versionId": "1",
    }
    assert _types(patch)["AgentConnected"] == "True"
    node.put_vmi(node.applied())
    await node.notify(DomainState.RUNNING, DomainReason.BOOTED, guest=_info(hostname="again"))
    await node.sync.reconcile(node.key)
    assert len(node.client.status_patches()) == before + 1  # nothing in the status changed

    # The agent goes away: the condition goes, guestOSInfo stays (as upstream).
    await node.notify(DomainState.RUNNING, DomainReason.BOOTED, guest=GuestInfo())
    await node.sync.reconcile(node.key)
    gone = node.client.status_patches()[-1]
    assert "AgentConnected" not in _types(gone)
    assert "guestOSInfo" not in gone


def test_access_credentials_synchronized_follows_the_launchers_outcome() -> None:
    offline = compute_status(
        _running(), _obs(access_credentials=AccessCredentialsView(False, "Guest agent is offline"))
    )
    (condition,) = [
        c for c in offline["conditions"] if c["type"] == "AccessCredentialsSynchronized"
    ]
    # upstream: status and message, no reason
    assert condition == {
        "type": "AccessCredentialsSynchronized",
        "status": "False",
        "message": "Guest agent is offline",
        "lastProbeTime": None,
        "lastTransitionTime": NOW,
    }
    settled = _running(conditions=offline["conditions"])
    synced = compute_status(
        settled, _obs(agent_connected=True, access_credentials=AccessCredentialsView(True))
    )
    assert _types(synced)["AccessCredentialsSynchronized"] == "True"
    # Nothing reported (a VMI without agent credentials, or no word yet): left as it is.
    kept = compute_status(_running(conditions=synced["conditions"]), _obs(agent_connected=True))
    assert kept == {}


async def test_access_credential_changes_become_upstreams_events(node: Node) -> None:
    await node.guest_running()
    failed = AccessCredentialsStatus(succeeded=False, message="Guest agent is offline")
    await node.notify(
        DomainState.RUNNING, DomainReason.BOOTED, guest=GuestInfo(access_credentials=failed)
    )
    await node.sync.reconcile(node.key)
    node.put_vmi(node.applied())
    await node.notify(DomainState.RUNNING, DomainReason.BOOTED, guest=_info(
        access_credentials=AccessCredentialsStatus(succeeded=True)
    ))  # fmt: skip
    await node.sync.reconcile(node.key)
    events = [
        (e["type"], e["reason"], e["message"])
        for e in node.client.events
        if e["reason"].startswith("AccessCredentials")
    ]
    assert events == [
        (
            "Warning",
            "AccessCredentialsSyncFailed",
            "Access credentials sync failed: Guest agent is offline",
        ),
        ("Normal", "AccessCredentialsSyncSuccess", "Access credentials sync successful."),
    ]


def test_an_unchanged_access_credentials_condition_is_no_event_on_a_cached_vmi() -> None:
    condition = {
        "type": "AccessCredentialsSynchronized",
        "status": "False",
        "message": "Guest agent is offline",
    }
    # The informer's copy holds its arrays as tuples (kube_runtime's freeze).
    cached = freeze({"status": {"conditions": [condition]}})
    assert access_credentials_event(cached, {"conditions": [dict(condition)]}) is None
    changed = {**condition, "status": "True", "message": ""}
    assert access_credentials_event(cached, {"conditions": [changed]}) == (
        "Normal",
        "AccessCredentialsSyncSuccess",
        "Access credentials sync successful.",
    )


async def test_guest_info_needs_a_connected_agent(node: Node) -> None:
    await node.guest_running()
    with pytest.raises(CommandError) as refused:
        await node.sync.guest_info("ns", "vm")
    assert (refused.value.status, refused.value.message) == (
        409,
        "VMI does not have guest agent connected",
    )
    node.launcher.guest = _info()
    assert (await node.sync.guest_info("ns", "vm")).hostname == "vm1"


async def test_freeze_and_unfreeze_reach_the_launcher(node: Node) -> None:
    await node.guest_running()
    with pytest.raises(CommandError) as refused:
        await node.sync.freeze("ns", "vm", 300)
    assert refused.value.status == 409
    node.launcher.guest = _info()
    await node.sync.freeze("ns", "vm", 300)
    assert node.launcher.freezes[-1].unfreeze_timeout_seconds == 300
    await node.sync.freeze("ns", "vm", None)
    assert node.launcher.calls[-2:] == ["Freeze", "Unfreeze"]


async def test_the_relay_serves_the_agent_subresources_and_freeze(node: Node) -> None:
    await node.guest_running()
    app = web.Application()
    app.add_routes(relay_routes(node.sync, node.sync.files))
    base = "/v1/namespaces/ns/virtualmachineinstances/vm"
    async with TestClient(TestServer(app)) as client:
        refused = await client.get(f"{base}/userlist")
        assert (refused.status, await refused.text()) == (
            409,
            "VMI does not have guest agent connected",
        )
        node.launcher.guest = _info()
        users = await client.get(f"{base}/userlist")
        assert (await users.json())["items"][0]["userName"] == "root"
        filesystems = await client.get(f"{base}/filesystemlist")
        assert (await filesystems.json())["items"][0]["mountPoint"] == "/boot"
        info = await client.get(f"{base}/guestosinfo")
        assert (await info.json())["os"]["name"] == "kubevirt-py guest"
        bad = await client.put(f"{base}/freeze", json={"unfreezeTimeout": "soon"})
        assert bad.status == 400
        frozen = await client.put(f"{base}/freeze", json={"unfreezeTimeout": "5m"})
        assert frozen.status == 200
        assert node.launcher.freezes[-1].unfreeze_timeout_seconds == 300
        thawed = await client.put(f"{base}/unfreeze")
        assert thawed.status == 200
    assert node.launcher.calls[-2:] == ["Freeze", "Unfreeze"]
