# ruff: noqa: RUF009  (field specs are dataclasses.field() objects built by attr/child/text)
"""The ``<devices>`` part of the libvirt domain model (object <-> XML only, no policy).

Field order is document order; it follows the order KubeVirt's converter emits so that
its documents round-trip unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from .xmlmap import attr, child, text

__all__ = [
    "TPM",
    "USER_ALIAS_PREFIX",
    "Address",
    "Alias",
    "BackingStore",
    "BackingStoreFormat",
    "BlockIO",
    "BootOrder",
    "Channel",
    "ChannelSource",
    "ChannelTarget",
    "Console",
    "ConsoleTarget",
    "Controller",
    "ControllerDriver",
    "Devices",
    "Disk",
    "DiskDriver",
    "DiskIOThread",
    "DiskIOThreads",
    "DiskSource",
    "DiskTarget",
    "Graphics",
    "GraphicsListen",
    "Input",
    "Interface",
    "InterfaceACPI",
    "InterfaceDriver",
    "InterfaceModel",
    "InterfaceSource",
    "InterfaceTarget",
    "LinkState",
    "Mac",
    "MemBalloon",
    "MemBalloonStats",
    "Mtu",
    "PanicDevice",
    "Rng",
    "RngBackend",
    "RngRate",
    "Rom",
    "Serial",
    "SerialLog",
    "SerialSource",
    "SerialTarget",
    "SoundCard",
    "TPMBackend",
    "Video",
    "VideoModel",
    "Watchdog",
]

#: KubeVirt's prefix for the aliases of the VMI's own devices (`ua-<name>`).
USER_ALIAS_PREFIX = "ua-"


@dataclass(slots=True, kw_only=True)
class Address:
    """``<address>``: where a device sits on its bus."""

    type: str | None = attr("type", None)
    domain: str | None = attr("domain", None)
    bus: str | None = attr("bus", None)
    slot: str | None = attr("slot", None)
    function: str | None = attr("function", None)
    controller: str | None = attr("controller", None)
    target: str | None = attr("target", None)
    unit: str | None = attr("unit", None)
    port: str | None = attr("port", None)


@dataclass(slots=True, kw_only=True)
class Alias:
    """``<alias name=…>``: KubeVirt names user devices ``ua-<name>``."""

    name: str = attr("name")

    @classmethod
    def of_user_device(cls, name: str) -> Alias:
        """The alias of the VMI's device `name` (a disk, interface, input…)."""
        return cls(name=f"{USER_ALIAS_PREFIX}{name}")

    @property
    def user_device(self) -> str | None:
        """The VMI device name this alias stands for; None for libvirt's own devices."""
        if self.name.startswith(USER_ALIAS_PREFIX):
            return self.name[len(USER_ALIAS_PREFIX) :]
        return None


@dataclass(slots=True, kw_only=True)
class BootOrder:
    """``<boot order=…>`` on a disk or interface."""

    order: int = attr("order")


# --- disks ------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class DiskSource:
    """``<source>`` of a disk: a file, a block device or a network name."""

    dev: str | None = attr("dev", None)
    file: str | None = attr("file", None)
    startup_policy: str | None = attr("startupPolicy", None)
    protocol: str | None = attr("protocol", None)
    name: str | None = attr("name", None)


@dataclass(slots=True, kw_only=True)
class DiskTarget:
    """``<target>`` of a disk: bus and guest device name."""

    bus: str | None = attr("bus", None)
    dev: str | None = attr("dev", None)
    tray: str | None = attr("tray", None)


@dataclass(slots=True, kw_only=True)
class DiskIOThread:
    """``<iothread id=…>`` of a disk driver's thread pool."""

    id: int = attr("id")


@dataclass(slots=True, kw_only=True)
class DiskIOThreads:
    """``<iothreads>`` of a disk driver: the pool threads it may use."""

    iothreads: list[DiskIOThread] = child("iothread", many=True)


@dataclass(slots=True, kw_only=True)
class DiskDriver:
    """``<driver>`` of a disk: format, cache, io mode, error policy, iothread."""

    cache: str | None = attr("cache", None)
    error_policy: str | None = attr("error_policy", None)
    io: str | None = attr("io", None)
    name: str | None = attr("name", None)
    type: str | None = attr("type", None)
    iothread: int | None = attr("iothread", None)
    iothreads: DiskIOThreads | None = child("iothreads", None)
    queues: int | None = attr("queues", None)
    discard: str | None = attr("discard", None)
    iommu: str | None = attr("iommu", None)


@dataclass(slots=True, kw_only=True)
class BackingStoreFormat:
    """``<format type=…>`` of a backing store."""

    type: str = attr("type")


@dataclass(slots=True, kw_only=True)
class BackingStore:
    """``<backingStore>``: the read-only image under a copy-on-write overlay."""

    type: str | None = attr("type", None)
    format: BackingStoreFormat | None = child("format", None)
    source: DiskSource | None = child("source", None)


@dataclass(slots=True, kw_only=True)
class BlockIO:
    """``<blockio>``: block sizes the guest sees."""

    logical_block_size: int | None = attr("logical_block_size", None)
    physical_block_size: int | None = attr("physical_block_size", None)
    discard_granularity: int | None = attr("discard_granularity", None)


@dataclass(slots=True, kw_only=True)
class Disk:
    """``<disk>``."""

    TAG = "disk"

    device: str = attr("device")
    snapshot: str | None = attr("snapshot", None)
    type: str = attr("type")
    source: DiskSource | None = child("source", None)
    target: DiskTarget | None = child("target", None)
    serial: str | None = child("serial", None)
    driver: DiskDriver | None = child("driver", None)
    readonly: bool = child("readonly", False)
    alias: Alias | None = child("alias", None)
    backing_store: BackingStore | None = child("backingStore", None)
    boot: BootOrder | None = child("boot", None)
    address: Address | None = child("address", None)
    model: str | None = attr("model", None)
    blockio: BlockIO | None = child("blockio", None)
    shareable: bool = child("shareable", False)


# --- network ----------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class InterfaceSource:
    """``<source>`` of an interface (empty for an ethernet tap the launcher prepares)."""

    network: str | None = attr("network", None)
    dev: str | None = attr("dev", None)
    bridge: str | None = attr("bridge", None)
    mode: str | None = attr("mode", None)


@dataclass(slots=True, kw_only=True)
class InterfaceTarget:
    """``<target dev=… managed=…>``: the host tap device."""

    dev: str = attr("dev")
    managed: str | None = attr("managed", None)


@dataclass(slots=True, kw_only=True)
class InterfaceModel:
    """``<model type=…>`` of an interface."""

    type: str = attr("type")


@dataclass(slots=True, kw_only=True)
class Mac:
    """``<mac address=…>``."""

    address: str = attr("address")


@dataclass(slots=True, kw_only=True)
class Mtu:
    """``<mtu size=…>``."""

    size: str = attr("size")


@dataclass(slots=True, kw_only=True)
class LinkState:
    """``<link state=…>``."""

    state: str = attr("state")


@dataclass(slots=True, kw_only=True)
class InterfaceDriver:
    """``<driver>`` of an interface (vhost, queues)."""

    name: str | None = attr("name", None)
    queues: int | None = attr("queues", None)
    iommu: str | None = attr("iommu", None)


@dataclass(slots=True, kw_only=True)
class Rom:
    """``<rom enabled=…>``: the interface's option ROM."""

    enabled: str = attr("enabled")


@dataclass(slots=True, kw_only=True)
class InterfaceACPI:
    """``<acpi index=…>``: a stable guest NIC name (``eno<index>``)."""

    index: int = attr("index")


@dataclass(slots=True, kw_only=True)
class Interface:
    """``<interface>``."""

    TAG = "interface"

    address: Address | None = child("address", None)
    type: str = attr("type")
    trust_guest_rx_filters: str | None = attr("trustGuestRxFilters", None)
    source: InterfaceSource | None = child("source", None)
    target: InterfaceTarget | None = child("target", None)
    model: InterfaceModel | None = child("model", None)
    mac: Mac | None = child("mac", None)
    mtu: Mtu | None = child("mtu", None)
    boot: BootOrder | None = child("boot", None)
    link: LinkState | None = child("link", None)
    alias: Alias | None = child("alias", None)
    driver: InterfaceDriver | None = child("driver", None)
    rom: Rom | None = child("rom", None)
    acpi: InterfaceACPI | None = child("acpi", None)


# --- character devices ------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class ChannelSource:
    """``<source mode=… path=…>`` of a channel."""

    mode: str | None = attr("mode", None)
    path: str | None = attr("path", None)


@dataclass(slots=True, kw_only=True)
class ChannelTarget:
    """``<target>`` of a channel (e.g. the guest agent's virtio port)."""

    name: str | None = attr("name", None)
    type: str | None = attr("type", None)
    address: str | None = attr("address", None)
    port: int | None = attr("port", None)
    state: str | None = attr("state", None)


@dataclass(slots=True, kw_only=True)
class Channel:
    """``<channel>``."""

    type: str = attr("type")
    source: ChannelSource | None = child("source", None)
    target: ChannelTarget | None = child("target", None)


@dataclass(slots=True, kw_only=True)
class SerialTarget:
    """``<target port=…>`` of a serial port."""

    port: int | None = attr("port", None)


@dataclass(slots=True, kw_only=True)
class SerialSource:
    """``<source mode=… path=…>`` of a serial port (a unix socket)."""

    mode: str | None = attr("mode", None)
    path: str | None = attr("path", None)


@dataclass(slots=True, kw_only=True)
class SerialLog:
    """``<log file=… append=…>``: keeps console output while no client is connected."""

    file: str | None = attr("file", None)
    append: str | None = attr("append", None)


@dataclass(slots=True, kw_only=True)
class Serial:
    """``<serial>``."""

    type: str = attr("type")
    target: SerialTarget | None = child("target", None)
    source: SerialSource | None = child("source", None)
    alias: Alias | None = child("alias", None)
    log: SerialLog | None = child("log", None)


@dataclass(slots=True, kw_only=True)
class ConsoleTarget:
    """``<target type=… port=…>`` of a console."""

    type: str | None = attr("type", None)
    port: int | None = attr("port", None)


@dataclass(slots=True, kw_only=True)
class Console:
    """``<console>``."""

    type: str = attr("type")
    target: ConsoleTarget | None = child("target", None)
    source: SerialSource | None = child("source", None)
    alias: Alias | None = child("alias", None)


# --- controllers, graphics, misc --------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class ControllerDriver:
    """``<driver>`` of a controller."""

    iothread: int | None = attr("iothread", None)
    queues: int | None = attr("queues", None)
    iommu: str | None = attr("iommu", None)


@dataclass(slots=True, kw_only=True)
class Controller:
    """``<controller>``."""

    type: str = attr("type")
    index: str = attr("index")
    model: str | None = attr("model", None)
    driver: ControllerDriver | None = child("driver", None)
    alias: Alias | None = child("alias", None)
    address: Address | None = child("address", None)


@dataclass(slots=True, kw_only=True)
class PanicDevice:
    """``<panic model=…>``."""

    model: str | None = attr("model", None)


@dataclass(slots=True, kw_only=True)
class VideoModel:
    """``<model>`` of a video device."""

    type: str = attr("type")
    heads: int | None = attr("heads", None)
    ram: int | None = attr("ram", None)
    vram: int | None = attr("vram", None)
    vgamem: int | None = attr("vgamem", None)


@dataclass(slots=True, kw_only=True)
class Video:
    """``<video>``."""

    model: VideoModel = child("model")


@dataclass(slots=True, kw_only=True)
class GraphicsListen:
    """``<listen>`` of a graphics device (a unix socket here)."""

    type: str = attr("type")
    address: str | None = attr("address", None)
    socket: str | None = attr("socket", None)


@dataclass(slots=True, kw_only=True)
class Graphics:
    """``<graphics>``."""

    autoport: str | None = attr("autoport", None)
    default_mode: str | None = attr("defaultMode", None)
    listen: GraphicsListen | None = child("listen", None)
    passwd_valid_to: str | None = attr("passwdValidTo", None)
    port: int | None = attr("port", None)
    tls_port: int | None = attr("tlsPort", None)
    type: str = attr("type")


@dataclass(slots=True, kw_only=True)
class MemBalloonStats:
    """``<stats period=…>`` of the memory balloon."""

    period: int = attr("period")


@dataclass(slots=True, kw_only=True)
class MemBalloon:
    """``<memballoon>``."""

    model: str = attr("model")
    stats: MemBalloonStats | None = child("stats", None)
    address: Address | None = child("address", None)
    free_page_reporting: str | None = attr("freePageReporting", None)


@dataclass(slots=True, kw_only=True)
class Input:
    """``<input>`` (tablet, keyboard)."""

    type: str = attr("type")
    bus: str | None = attr("bus", None)
    alias: Alias | None = child("alias", None)
    address: Address | None = child("address", None)
    model: str | None = attr("model", None)


@dataclass(slots=True, kw_only=True)
class Watchdog:
    """``<watchdog>``."""

    model: str = attr("model")
    action: str = attr("action")
    alias: Alias | None = child("alias", None)
    address: Address | None = child("address", None)


@dataclass(slots=True, kw_only=True)
class RngRate:
    """``<rate>`` of an RNG device."""

    period: int | None = attr("period", None)
    bytes: int = attr("bytes")


@dataclass(slots=True, kw_only=True)
class RngBackend:
    """``<backend model=…>/dev/urandom</backend>``."""

    model: str = attr("model")
    source: str = text("")


@dataclass(slots=True, kw_only=True)
class Rng:
    """``<rng>``."""

    model: str = attr("model")
    rate: RngRate | None = child("rate", None)
    backend: RngBackend | None = child("backend", None)
    address: Address | None = child("address", None)


@dataclass(slots=True, kw_only=True)
class SoundCard:
    """``<sound model=…>``."""

    alias: Alias | None = child("alias", None)
    model: str = attr("model")


@dataclass(slots=True, kw_only=True)
class TPMBackend:
    """``<backend type='emulator' version='2.0'>``: swtpm run by libvirt."""

    type: str = attr("type")
    version: str | None = attr("version", None)
    persistent_state: str | None = attr("persistent_state", None)


@dataclass(slots=True, kw_only=True)
class TPM:
    """``<tpm model=…>``."""

    model: str = attr("model")
    backend: TPMBackend = child("backend")


@dataclass(slots=True, kw_only=True)
class Devices:
    """``<devices>``: every device of the domain, grouped by kind."""

    emulator: str | None = child("emulator", None)
    interfaces: list[Interface] = child("interface", many=True)
    channels: list[Channel] = child("channel", many=True)
    panic_devices: list[PanicDevice] = child("panic", many=True)
    controllers: list[Controller] = child("controller", many=True)
    videos: list[Video] = child("video", many=True)
    graphics: list[Graphics] = child("graphics", many=True)
    memballoon: MemBalloon | None = child("memballoon", None)
    disks: list[Disk] = child("disk", many=True)
    inputs: list[Input] = child("input", many=True)
    serials: list[Serial] = child("serial", many=True)
    consoles: list[Console] = child("console", many=True)
    watchdogs: list[Watchdog] = child("watchdog", many=True)
    rng: Rng | None = child("rng", None)
    sound_cards: list[SoundCard] = child("sound", many=True)
    tpms: list[TPM] = child("tpm", many=True)
