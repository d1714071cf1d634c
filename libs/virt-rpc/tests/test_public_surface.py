"""virt_rpc re-exports every generated message, enum, stub and base."""

from __future__ import annotations

import virt_rpc
from virt_rpc.generated.kubevirtpy.launcher import handshake, v1


def test_every_generated_name_is_reexported() -> None:
    missing = (set(v1.__all__) | set(handshake.__all__)) - set(virt_rpc.__all__)
    assert not missing, f"add to virt_rpc/__init__.py: {sorted(missing)}"


def test_protocol_version_is_the_generated_package() -> None:
    assert virt_rpc.PROTOCOL_VERSION in virt_rpc.SUPPORTED_PROTOCOL_VERSIONS
    assert v1.__name__.endswith(f".v{virt_rpc.PROTOCOL_VERSION}")
    assert virt_rpc.CmdStub is v1.CmdStub


def test_messages_round_trip_through_the_wire_format() -> None:
    request = virt_rpc.ShutdownRequest(
        vmi=virt_rpc.VmiRef(namespace="default", name="vm1", uid="u-1"), grace_period_seconds=0
    )
    decoded = virt_rpc.ShutdownRequest.parse(bytes(request))
    assert decoded.vmi == request.vmi
    # 0 is sent explicitly (destroy at once), distinct from unset (use the VMI's value).
    assert decoded.grace_period_seconds == 0
    assert (
        virt_rpc.ShutdownRequest.parse(bytes(virt_rpc.ShutdownRequest())).grace_period_seconds
        is None
    )
