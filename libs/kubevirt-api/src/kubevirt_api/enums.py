"""Closed sets of values used by the typed models.

Values follow upstream KubeVirt: swagger.json where it lists them, upstream's Go constants
and admission rules elsewhere. A StrEnum compares equal to its plain string value.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "FINAL_MIGRATION_PHASES",
    "FINAL_POD_PHASES",
    "FINAL_VMI_PHASES",
    "AccessMode",
    "DNSPolicy",
    "DataVolumeContentType",
    "DiskBus",
    "DiskCache",
    "DiskErrorPolicy",
    "DiskIO",
    "EvictionStrategy",
    "HypervisorName",
    "IOThreadsPolicy",
    "InputBus",
    "InputType",
    "InstancetypeReferencePolicy",
    "MemLockRequirement",
    "MigrationCompression",
    "NodeSelectorOperator",
    "PersistentVolumeMode",
    "PodPhase",
    "PoolSortPolicy",
    "PortProtocol",
    "PullPolicy",
    "QOSClass",
    "RebootPolicy",
    "RoleAggregationStrategy",
    "RunStrategy",
    "StatePreservation",
    "TLSProtocolVersion",
    "TaintEffect",
    "TolerationOperator",
    "TopologySpreadPolicy",
    "URIScheme",
    "UnsatisfiableConstraintAction",
    "UpdateVolumesStrategy",
    "VMRolloutStrategy",
    "VirtualMachineInstanceMigrationPhase",
    "VirtualMachineInstancePhase",
    "VirtualMachinePrintableStatus",
    "WatchdogAction",
]


class RunStrategy(StrEnum):
    """``VirtualMachine.spec.runStrategy``."""

    ALWAYS = "Always"
    RERUN_ON_FAILURE = "RerunOnFailure"
    MANUAL = "Manual"
    HALTED = "Halted"
    ONCE = "Once"
    WAIT_AS_RECEIVER = "WaitAsReceiver"


class VirtualMachineInstancePhase(StrEnum):
    """``VirtualMachineInstance.status.phase``."""

    UNSET = ""
    PENDING = "Pending"
    SCHEDULING = "Scheduling"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"
    WAITING_FOR_SYNC = "WaitingForSync"


class VirtualMachineInstanceMigrationPhase(StrEnum):
    """``VirtualMachineInstanceMigration.status.phase``."""

    UNSET = ""
    PENDING = "Pending"
    SCHEDULING = "Scheduling"
    SCHEDULED = "Scheduled"
    PREPARING_TARGET = "PreparingTarget"
    TARGET_READY = "TargetReady"
    WAITING_FOR_SYNC = "WaitingForSync"
    SYNCHRONIZING = "Synchronizing"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class VirtualMachinePrintableStatus(StrEnum):
    """``VirtualMachine.status.printableStatus`` (what ``kubectl get vm`` shows)."""

    STOPPED = "Stopped"
    PROVISIONING = "Provisioning"
    STARTING = "Starting"
    RUNNING = "Running"
    PAUSED = "Paused"
    STOPPING = "Stopping"
    TERMINATING = "Terminating"
    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
    MIGRATING = "Migrating"
    UNKNOWN = "Unknown"
    ERROR_UNSCHEDULABLE = "ErrorUnschedulable"
    ERR_IMAGE_PULL = "ErrImagePull"
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    ERROR_PVC_NOT_FOUND = "ErrorPvcNotFound"
    DATA_VOLUME_ERROR = "DataVolumeError"
    WAITING_FOR_VOLUME_BINDING = "WaitingForVolumeBinding"
    WAITING_FOR_RECEIVER = "WaitingForReceiver"


class PodPhase(StrEnum):
    """``Pod.status.phase`` (Kubernetes' values), as the launcher pod reports it."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


#: VMI phases a VMI never leaves: its guest is gone and it never runs again.
FINAL_VMI_PHASES: frozenset[str] = frozenset(
    {VirtualMachineInstancePhase.SUCCEEDED, VirtualMachineInstancePhase.FAILED}
)
#: Pod phases of a pod whose containers have all ended (it never runs again).
FINAL_POD_PHASES: frozenset[str] = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
#: Migration phases that end a migration (it is never retried).
FINAL_MIGRATION_PHASES: frozenset[str] = frozenset(
    {VirtualMachineInstanceMigrationPhase.SUCCEEDED, VirtualMachineInstanceMigrationPhase.FAILED}
)


class EvictionStrategy(StrEnum):
    """What happens to a VMI when its node is drained."""

    NONE = "None"
    LIVE_MIGRATE = "LiveMigrate"
    LIVE_MIGRATE_IF_POSSIBLE = "LiveMigrateIfPossible"
    EXTERNAL = "External"


class UpdateVolumesStrategy(StrEnum):
    """``VirtualMachine.spec.updateVolumesStrategy``."""

    REPLACEMENT = "Replacement"
    MIGRATION = "Migration"


class DiskBus(StrEnum):
    """Bus of a disk, LUN or CD-ROM target (upstream refuses ``ide``)."""

    VIRTIO = "virtio"
    SATA = "sata"
    SCSI = "scsi"
    USB = "usb"


class DiskCache(StrEnum):
    """Host page cache mode of a disk."""

    NONE = "none"
    WRITETHROUGH = "writethrough"
    WRITEBACK = "writeback"


class DiskIO(StrEnum):
    """Disk I/O mode."""

    NATIVE = "native"
    THREADS = "threads"


class DiskErrorPolicy(StrEnum):
    """What the guest sees on a disk error."""

    STOP = "stop"
    IGNORE = "ignore"
    REPORT = "report"
    ENOSPACE = "enospace"


class IOThreadsPolicy(StrEnum):
    """``spec.domain.ioThreadsPolicy``."""

    SHARED = "shared"
    AUTO = "auto"
    SUPPLEMENTAL_POOL = "supplementalPool"


class InputBus(StrEnum):
    """Bus of an input device."""

    USB = "usb"
    VIRTIO = "virtio"


class InputType(StrEnum):
    """Kind of an input device."""

    TABLET = "tablet"
    KEYBOARD = "keyboard"


class WatchdogAction(StrEnum):
    """What the i6300esb watchdog does when it fires."""

    POWEROFF = "poweroff"
    RESET = "reset"
    SHUTDOWN = "shutdown"


class PortProtocol(StrEnum):
    """Protocol of a forwarded interface port."""

    TCP = "TCP"
    UDP = "UDP"


class DNSPolicy(StrEnum):
    """``spec.dnsPolicy`` (as for pods)."""

    CLUSTER_FIRST = "ClusterFirst"
    CLUSTER_FIRST_WITH_HOST_NET = "ClusterFirstWithHostNet"
    DEFAULT = "Default"
    NONE = "None"


class PullPolicy(StrEnum):
    """Image pull policy (as for containers)."""

    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class QOSClass(StrEnum):
    """Quality of service class of the launcher pod."""

    BEST_EFFORT = "BestEffort"
    BURSTABLE = "Burstable"
    GUARANTEED = "Guaranteed"


class AccessMode(StrEnum):
    """Persistent volume access mode."""

    READ_ONLY_MANY = "ReadOnlyMany"
    READ_WRITE_MANY = "ReadWriteMany"
    READ_WRITE_ONCE = "ReadWriteOnce"
    READ_WRITE_ONCE_POD = "ReadWriteOncePod"


class PersistentVolumeMode(StrEnum):
    """Persistent volume mode (``FromStorageProfile`` is CDI's)."""

    BLOCK = "Block"
    FILESYSTEM = "Filesystem"
    FROM_STORAGE_PROFILE = "FromStorageProfile"


class URIScheme(StrEnum):
    """Scheme of an HTTP probe."""

    HTTP = "HTTP"
    HTTPS = "HTTPS"


class NodeSelectorOperator(StrEnum):
    """Operator of a node selector requirement."""

    DOES_NOT_EXIST = "DoesNotExist"
    EXISTS = "Exists"
    GT = "Gt"
    IN = "In"
    LT = "Lt"
    NOT_IN = "NotIn"


class TolerationOperator(StrEnum):
    """Operator of a toleration."""

    EQUAL = "Equal"
    EXISTS = "Exists"


class TaintEffect(StrEnum):
    """Effect of a taint or toleration."""

    NO_EXECUTE = "NoExecute"
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"


class TopologySpreadPolicy(StrEnum):
    """``nodeAffinityPolicy`` / ``nodeTaintsPolicy`` of a topology spread constraint."""

    HONOR = "Honor"
    IGNORE = "Ignore"


class UnsatisfiableConstraintAction(StrEnum):
    """``whenUnsatisfiable`` of a topology spread constraint."""

    DO_NOT_SCHEDULE = "DoNotSchedule"
    SCHEDULE_ANYWAY = "ScheduleAnyway"


class RebootPolicy(StrEnum):
    """``spec.domain.rebootPolicy``: what a guest reboot does."""

    REBOOT = "Reboot"
    TERMINATE = "Terminate"


class MemLockRequirement(StrEnum):
    """``spec.domain.memory.reservedOverhead.memLock``."""

    NOT_REQUIRED = "NotRequired"
    REQUIRED = "Required"


class MigrationCompression(StrEnum):
    """Experimental migration stream compression."""

    NONE = "none"
    ZSTD = "zstd"


class DataVolumeContentType(StrEnum):
    """CDI DataVolume content type."""

    KUBEVIRT = "kubevirt"
    ARCHIVE = "archive"


class PoolSortPolicy(StrEnum):
    """Order in which a pool picks VMs to act on."""

    ASCENDING_ORDER = "AscendingOrder"
    DESCENDING_ORDER = "DescendingOrder"
    NEWEST = "Newest"
    OLDEST = "Oldest"
    RANDOM = "Random"


class StatePreservation(StrEnum):
    """What a pool keeps of a VM it scales in."""

    DISABLED = "Disabled"
    OFFLINE = "Offline"
    ONLINE = "Online"


class VMRolloutStrategy(StrEnum):
    """How VM spec changes reach running VMIs."""

    STAGE = "Stage"
    LIVE_UPDATE = "LiveUpdate"


class HypervisorName(StrEnum):
    """Hypervisors a cluster can offer."""

    KVM = "kvm"
    HYPERV_DIRECT = "hyperv-direct"


class TLSProtocolVersion(StrEnum):
    """Minimum TLS version of KubeVirt's servers."""

    VERSION_TLS10 = "VersionTLS10"
    VERSION_TLS11 = "VersionTLS11"
    VERSION_TLS12 = "VersionTLS12"
    VERSION_TLS13 = "VersionTLS13"


class RoleAggregationStrategy(StrEnum):
    """Whether KubeVirt's roles aggregate into the default cluster roles."""

    AGGREGATE_TO_DEFAULT = "AggregateToDefault"
    MANUAL = "Manual"


class InstancetypeReferencePolicy(StrEnum):
    """How VMs keep references to instancetypes and preferences."""

    REFERENCE = "reference"
    EXPAND = "expand"
    EXPAND_ALL = "expandAll"
