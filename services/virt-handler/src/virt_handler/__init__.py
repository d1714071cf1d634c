"""The node agent that drives each launcher: virt-handler.

Public surface for tests and tools; the process is `python -m virt_handler` (see app.py).
"""

from .app import build_parser, main, use_emulation_from
from .deviceplugin import DEFAULT_DEVICES, DeviceKind, DevicePlugin, DevicePluginManager
from .heartbeat import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL, Heartbeat, heartbeat_patch
from .launcher import LauncherConnection, connect_launcher
from .notify import NotifyServer, NotifyService, VmiIdentity
from .podfiles import LAUNCHER_SOCKET, NOTIFY_SOCKET, SERIAL_SOCKET, VNC_SOCKET, PodFiles, pod_uid
from .safepath import PathRefusedError, PinnedDir, open_dir
from .status import DomainView, GuestOsView, Observation, compute_status
from .vmi_sync import CommandError, SyncSettings, VmiSync

__all__ = [
    "DEFAULT_DEVICES",
    "HEARTBEAT_ANNOTATION",
    "LAUNCHER_SOCKET",
    "NOTIFY_SOCKET",
    "SCHEDULABLE_LABEL",
    "SERIAL_SOCKET",
    "VNC_SOCKET",
    "CommandError",
    "DeviceKind",
    "DevicePlugin",
    "DevicePluginManager",
    "DomainView",
    "GuestOsView",
    "Heartbeat",
    "LauncherConnection",
    "NotifyServer",
    "NotifyService",
    "Observation",
    "PathRefusedError",
    "PinnedDir",
    "PodFiles",
    "SyncSettings",
    "VmiIdentity",
    "VmiSync",
    "build_parser",
    "compute_status",
    "connect_launcher",
    "heartbeat_patch",
    "main",
    "open_dir",
    "pod_uid",
    "use_emulation_from",
]
