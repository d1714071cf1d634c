"""libvirt's lifecycle events and states decode to the launcher's states and reasons."""

from __future__ import annotations

import libvirt
import pytest
from virt_launcher import ChangeKind, DomainReason, DomainState
from virt_launcher.states import decode_lifecycle, decode_state


@pytest.mark.parametrize(
    ("event", "detail", "expected"),
    [
        (libvirt.VIR_DOMAIN_EVENT_DEFINED, libvirt.VIR_DOMAIN_EVENT_DEFINED_ADDED,
         (ChangeKind.ADDED, DomainState.SHUTOFF, DomainReason.UNSPECIFIED)),
        (libvirt.VIR_DOMAIN_EVENT_DEFINED, libvirt.VIR_DOMAIN_EVENT_DEFINED_UPDATED,
         (ChangeKind.MODIFIED, DomainState.SHUTOFF, DomainReason.UNSPECIFIED)),
        (libvirt.VIR_DOMAIN_EVENT_UNDEFINED, 0,
         (ChangeKind.DELETED, DomainState.SHUTOFF, DomainReason.NON_EXISTENT)),
        (libvirt.VIR_DOMAIN_EVENT_STARTED, libvirt.VIR_DOMAIN_EVENT_STARTED_BOOTED,
         (ChangeKind.MODIFIED, DomainState.RUNNING, DomainReason.BOOTED)),
        (libvirt.VIR_DOMAIN_EVENT_SUSPENDED, libvirt.VIR_DOMAIN_EVENT_SUSPENDED_PAUSED,
         (ChangeKind.MODIFIED, DomainState.PAUSED, DomainReason.USER)),
        (libvirt.VIR_DOMAIN_EVENT_SUSPENDED, libvirt.VIR_DOMAIN_EVENT_SUSPENDED_IOERROR,
         (ChangeKind.MODIFIED, DomainState.PAUSED, DomainReason.IO_ERROR)),
        (libvirt.VIR_DOMAIN_EVENT_RESUMED, libvirt.VIR_DOMAIN_EVENT_RESUMED_UNPAUSED,
         (ChangeKind.MODIFIED, DomainState.RUNNING, DomainReason.UNPAUSED)),
        (libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN,
         (ChangeKind.MODIFIED, DomainState.SHUTOFF, DomainReason.GUEST_SHUTDOWN)),
        (libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_DESTROYED,
         (ChangeKind.MODIFIED, DomainState.SHUTOFF, DomainReason.DESTROYED)),
        (libvirt.VIR_DOMAIN_EVENT_STOPPED, libvirt.VIR_DOMAIN_EVENT_STOPPED_CRASHED,
         (ChangeKind.MODIFIED, DomainState.SHUTOFF, DomainReason.CRASHED)),
        (libvirt.VIR_DOMAIN_EVENT_CRASHED, 0,
         (ChangeKind.MODIFIED, DomainState.CRASHED, DomainReason.PANICKED)),
        # A detail newer than this code knows is not an error: the reason is unspecified.
        (libvirt.VIR_DOMAIN_EVENT_STARTED, 99,
         (ChangeKind.MODIFIED, DomainState.RUNNING, DomainReason.UNSPECIFIED)),
    ],
)  # fmt: skip
def test_lifecycle_events_decode(
    event: int, detail: int, expected: tuple[ChangeKind, DomainState, DomainReason]
) -> None:
    assert decode_lifecycle(event, detail) == expected


@pytest.mark.parametrize(
    ("state", "reason", "expected"),
    [
        (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_BOOTED,
         (DomainState.RUNNING, DomainReason.BOOTED)),
        (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_UNPAUSED,
         (DomainState.RUNNING, DomainReason.UNPAUSED)),
        (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_WAKEUP,
         (DomainState.RUNNING, DomainReason.WAKEUP)),
        (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_USER,
         (DomainState.PAUSED, DomainReason.USER)),
        (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_STARTING_UP,
         (DomainState.PAUSED, DomainReason.STARTING_UP)),
        (libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN,
         (DomainState.SHUTOFF, DomainReason.GUEST_SHUTDOWN)),
        (libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_DESTROYED,
         (DomainState.SHUTOFF, DomainReason.DESTROYED)),
        (libvirt.VIR_DOMAIN_CRASHED, libvirt.VIR_DOMAIN_CRASHED_PANICKED,
         (DomainState.CRASHED, DomainReason.PANICKED)),
        (42, 0, (DomainState.UNSPECIFIED, DomainReason.UNSPECIFIED)),
    ],
)  # fmt: skip
def test_domain_states_decode(
    state: int, reason: int, expected: tuple[DomainState, DomainReason]
) -> None:
    assert decode_state(state, reason) == expected


def test_values_match_the_protocol() -> None:
    from virt_rpc import DomainReason as WireReason
    from virt_rpc import DomainState as WireState

    assert {s.name: s.value for s in DomainState} == {
        s.name.removeprefix("DOMAIN_STATE_"): s.value for s in WireState
    }
    assert {r.name: r.value for r in DomainReason} == {
        r.name.removeprefix("DOMAIN_REASON_"): r.value for r in WireReason
    }
