"""Every status the launcher reports names the guest's interfaces (status.interfaces
and the VMI's IP column are built from them)."""

from __future__ import annotations

from virt_launcher.cmd_server import to_domain
from virt_launcher.states import DomainReason, DomainState, DomainStatus, GuestNic, guest_nics

XML = """<domain type='qemu'><name>ns_vm</name><devices>
<interface type='ethernet'><mac address='02:11:22:33:44:55'/>
<target dev='tap0' managed='no'/><model type='virtio'/><alias name='ua-default'/></interface>
<interface type='ethernet'><mac address='02:00:00:00:00:09'/><alias name='net0'/></interface>
</devices></domain>"""


def test_the_user_interfaces_of_a_domain_are_named_by_their_alias() -> None:
    # The second interface is libvirt's own (no ua- alias): not the VMI's.
    assert guest_nics(XML) == (GuestNic("default", "02:11:22:33:44:55", "tap0"),)


def test_the_wire_domain_carries_them() -> None:
    status = DomainStatus(
        "ns_vm", "u", DomainState.RUNNING, DomainReason.BOOTED, interfaces=guest_nics(XML)
    )
    [nic] = to_domain(status).interfaces
    assert (nic.name, nic.mac, nic.target_device) == ("default", "02:11:22:33:44:55", "tap0")
