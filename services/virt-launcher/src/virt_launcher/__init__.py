"""Per-VM launcher: libvirtd supervision, domain manager, Cmd server, Notify client.

The public surface: :class:`Host` and :class:`Guest` (a typed, async facade over
libvirt-python whose calls all run in a :class:`BlockingExecutor`), the
:class:`DomainManager` (commands, lifecycle events, reboot hiding, grace period),
and the launcher's values (:class:`DomainStatus`, :class:`DomainChange`, ...).
"""

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
