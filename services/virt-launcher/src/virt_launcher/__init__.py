"""Per-VM launcher: libvirtd supervision, domain manager, Cmd server, Notify client.

The public surface: :class:`Host` and :class:`Guest` (a typed, async facade over
libvirt-python whose calls all run in a :class:`BlockingExecutor`), the
:class:`DomainManager` (commands, lifecycle events, reboot hiding, grace period),
and the launcher's values (:class:`DomainStatus`, :class:`DomainChange`, ...).

The names are imported on first use (PEP 562), so ``python -m virt_launcher`` can start
libvirtd (`virt_launcher.headstart`) before the launcher's heavy imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from virt_launcher.domain_manager import DomainManager, Notice, NoticeType
    from virt_launcher.errors import (
        DomainNotFoundError,
        DomainStateError,
        LibvirtError,
        LibvirtUnavailableError,
    )
    from virt_launcher.events import EventLoopConflictError, register_event_loop
    from virt_launcher.executor import BlockingExecutor
    from virt_launcher.guest import Guest
    from virt_launcher.host import Host
    from virt_launcher.states import (
        ChangeKind,
        DomainChange,
        DomainReason,
        DomainState,
        DomainStatus,
        LifecycleEvent,
    )

__all__ = [
    "BlockingExecutor",
    "ChangeKind",
    "DomainChange",
    "DomainManager",
    "DomainNotFoundError",
    "DomainReason",
    "DomainState",
    "DomainStateError",
    "DomainStatus",
    "EventLoopConflictError",
    "Guest",
    "Host",
    "LibvirtError",
    "LibvirtUnavailableError",
    "LifecycleEvent",
    "Notice",
    "NoticeType",
    "register_event_loop",
]

_SOURCES = (
    "virt_launcher.domain_manager",
    "virt_launcher.errors",
    "virt_launcher.events",
    "virt_launcher.executor",
    "virt_launcher.guest",
    "virt_launcher.host",
    "virt_launcher.states",
)


def __getattr__(name: str) -> object:
    for source in _SOURCES if name in __all__ else ():
        if hasattr(module := importlib.import_module(source), name):
            return globals().setdefault(name, getattr(module, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
