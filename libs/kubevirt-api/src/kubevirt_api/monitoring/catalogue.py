"""Upstream KubeVirt's metrics, per component: name, type and help text.

Taken from kubevirt/kubevirt at d923fdb8 (2026-08-22): the names and the component from
`pkg/monitoring/metrics/<component>/`, type and help from `docs/observability/metrics.md`.
Components also register the shared groups (`pkg/monitoring/metrics/common/`): every one
the REST client's and the work queue's, virt-controller and virt-handler also
`kubevirt_vmi_sync_total`. A fact of upstream's, kept in one place: the coverage test
and the docs read it; services declare their metrics themselves, with these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "COMPONENTS",
    "SHARED_GROUPS",
    "UPSTREAM_METRICS",
    "UpstreamMetric",
    "upstream_metrics_of",
]

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class UpstreamMetric:
    """One metric as upstream declares it."""

    name: str
    kind: Kind
    help: str


def _m(name: str, kind: Kind, help: str) -> UpstreamMetric:
    return UpstreamMetric(name, kind, help)


#: The metrics each component (or shared group) declares, in upstream's file order.
UPSTREAM_METRICS: Final[dict[str, tuple[UpstreamMetric, ...]]] = {
    "rest_client": (
        _m(
            "kubevirt_rest_client_request_latency_seconds",
            "histogram",
            "Request latency in seconds. Broken down by verb and URL.",
        ),
        _m(
            "kubevirt_rest_client_rate_limiter_duration_seconds",
            "histogram",
            "Client side rate limiter latency in seconds. Broken down by verb and URL.",
        ),
        _m(
            "kubevirt_rest_client_requests_total",
            "counter",
            "Number of HTTP requests, partitioned by status code, method, and host.",
        ),
    ),
    "vmisync": (
        _m(
            "kubevirt_vmi_sync_total",
            "counter",
            "Total number of times a VirtualMachineInstance has been synced.",
        ),
    ),
    "workqueue": (
        _m(
            "kubevirt_workqueue_depth",
            "gauge",
            "Current depth of workqueue",
        ),
        _m(
            "kubevirt_workqueue_adds_total",
            "counter",
            "Total number of adds handled by workqueue",
        ),
        _m(
            "kubevirt_workqueue_queue_duration_seconds",
            "histogram",
            "How long an item stays in workqueue before being requested.",
        ),
        _m(
            "kubevirt_workqueue_work_duration_seconds",
            "histogram",
            "How long in seconds processing an item from workqueue takes.",
        ),
        _m(
            "kubevirt_workqueue_retries_total",
            "counter",
            "Total number of retries handled by workqueue",
        ),
        _m(
            "kubevirt_workqueue_longest_running_processor_seconds",
            "gauge",
            "How many seconds has the longest running processor for workqueue been running.",
        ),
        _m(
            "kubevirt_workqueue_unfinished_work_seconds",
            "gauge",
            "How many seconds of work have been in progress without being observed by work_duration. Large values indicate stuck threads. The number of stuck threads can be deduced by observing the rate at which this value increases.",
        ),
    ),
    "virt-api": (
        _m(
            "kubevirt_virt_api_ready_status",
            "gauge",
            "Indication for a virt-api server that is ready to serve requests.",
        ),
        _m(
            "kubevirt_portforward_active_tunnels",
            "gauge",
            "Amount of active portforward tunnels, broken down by namespace and vmi name.",
        ),
        _m(
            "kubevirt_vnc_active_connections",
            "gauge",
            "Amount of active VNC connections, broken down by namespace and vmi name.",
        ),
        _m(
            "kubevirt_console_active_connections",
            "gauge",
            "Amount of active Console connections, broken down by namespace and vmi name.",
        ),
        _m(
            "kubevirt_usbredir_active_connections",
            "gauge",
            "Amount of active USB redirection connections, broken down by namespace and vmi name.",
        ),
        _m(
            "kubevirt_vmi_last_api_connection_timestamp_seconds",
            "gauge",
            "Virtual Machine Instance last API connection timestamp. Including VNC, console, portforward, SSH and usbredir connections.",
        ),
        _m(
            "kubevirt_vm_created_by_pod_total",
            "counter",
            "[Deprecated] The total number of VMs created by namespace and virt-api pod, since install.",
        ),
    ),
    "virt-controller": (
        _m(
            "kubevirt_virt_controller_leading_status",
            "gauge",
            "Indication for an operating virt-controller.",
        ),
        _m(
            "kubevirt_virt_controller_ready_status",
            "gauge",
            "Indication for a virt-controller that is ready to take the lead.",
        ),
        _m(
            "kubevirt_vmi_number_of_outdated",
            "gauge",
            "Indication for the total number of VirtualMachineInstance workloads that are not running within the most up-to-date version of the virt-launcher environment.",
        ),
        _m(
            "kubevirt_vmi_migration_phase_transition_time_from_creation_seconds",
            "histogram",
            "Histogram of VM migration phase transitions duration from creation time in seconds.",
        ),
        _m(
            "kubevirt_vmi_migrations_in_pending_phase",
            "gauge",
            "Number of current pending migrations.",
        ),
        _m(
            "kubevirt_vmi_migrations_in_scheduling_phase",
            "gauge",
            "Number of current scheduling migrations.",
        ),
        _m(
            "kubevirt_vmi_migrations_in_unset_phase",
            "gauge",
            "Number of current unset migrations. These are pending items the virt-controller hasn\u2019t processed yet from the queue.",
        ),
        _m(
            "kubevirt_vmi_migrations_in_running_phase",
            "gauge",
            "Number of current running migrations.",
        ),
        _m(
            "kubevirt_vmi_migration_succeeded",
            "gauge",
            "Indicates if the VMI migration succeeded.",
        ),
        _m(
            "kubevirt_vmi_migration_failed",
            "gauge",
            "Indicates if the VMI migration failed.",
        ),
        _m(
            "kubevirt_vmi_phase_transition_time_seconds",
            "histogram",
            "Histogram of VM phase transitions duration between different phases in seconds.",
        ),
        _m(
            "kubevirt_vmi_phase_transition_time_from_creation_seconds",
            "histogram",
            "Histogram of VM phase transitions duration from creation time in seconds.",
        ),
        _m(
            "kubevirt_vmi_phase_transition_time_from_deletion_seconds",
            "histogram",
            "Histogram of VM phase transitions duration from deletion time in seconds.",
        ),
        _m(
            "kubevirt_vmi_info",
            "gauge",
            "Information about VirtualMachineInstances.",
        ),
        _m(
            "kubevirt_vmi_non_evictable",
            "gauge",
            "Indication for a VirtualMachine that its eviction strategy is set to Live Migration but is not migratable.",
        ),
        _m(
            "kubevirt_vmi_status_addresses",
            "gauge",
            "The addresses of a VirtualMachineInstance. This metric provides the address of an available network interface associated with the VMI in the 'address' label, and about the type of address, such as internal IP, in the 'type' label.",
        ),
        _m(
            "kubevirt_vmi_migration_start_time_seconds",
            "gauge",
            "The time at which the migration started.",
        ),
        _m(
            "kubevirt_vmi_migration_end_time_seconds",
            "gauge",
            "The time at which the migration ended.",
        ),
        _m(
            "kubevirt_vmi_vnic_info",
            "gauge",
            "Details of VirtualMachineInstance (VMI) vNIC interfaces, such as vNIC name, binding type, network name, and binding name for each vNIC of a running instance.",
        ),
        _m(
            "kubevirt_vmi_launcher_memory_overhead_bytes",
            "gauge",
            "Estimation of the memory amount required for virt-launcher's infrastructure components (e.g. libvirt, QEMU).",
        ),
        _m(
            "kubevirt_vmsnapshot_succeeded_timestamp_seconds",
            "gauge",
            "Returns the timestamp of successful virtual machine snapshot.",
        ),
        _m(
            "kubevirt_vm_starting_status_last_transition_timestamp_seconds",
            "counter",
            "Virtual Machine last transition timestamp to starting status.",
        ),
        _m(
            "kubevirt_vm_running_status_last_transition_timestamp_seconds",
            "counter",
            "Virtual Machine last transition timestamp to running status.",
        ),
        _m(
            "kubevirt_vm_migrating_status_last_transition_timestamp_seconds",
            "counter",
            "Virtual Machine last transition timestamp to migrating status.",
        ),
        _m(
            "kubevirt_vm_non_running_status_last_transition_timestamp_seconds",
            "counter",
            "Virtual Machine last transition timestamp to paused/stopped status.",
        ),
        _m(
            "kubevirt_vm_error_status_last_transition_timestamp_seconds",
            "counter",
            "Virtual Machine last transition timestamp to error status.",
        ),
        _m(
            "kubevirt_vm_resource_requests",
            "gauge",
            "Resources requested by Virtual Machine. Reports memory and CPU requests.",
        ),
        _m(
            "kubevirt_vm_resource_limits",
            "gauge",
            "Resource limits set for a Virtual Machine. Reports CPU and memory limits only when they are defined.",
        ),
        _m(
            "kubevirt_vm_info",
            "gauge",
            "Information about Virtual Machines.",
        ),
        _m(
            "kubevirt_vm_disk_allocated_size_bytes",
            "gauge",
            "Allocated disk size of a Virtual Machine in bytes, based on its PersistentVolumeClaim. Includes persistentvolumeclaim (PVC name), volume_mode (disk presentation mode: Filesystem or Block), and device (disk name).",
        ),
        _m(
            "kubevirt_vm_create_date_timestamp_seconds",
            "gauge",
            "Virtual Machine creation timestamp.",
        ),
        _m(
            "kubevirt_vm_vnic_info",
            "gauge",
            "Details of Virtual Machine (VM) vNIC interfaces, such as vNIC name, binding type, network name, and binding name for each vNIC defined in the VM's configuration.",
        ),
        _m(
            "kubevirt_vm_labels",
            "gauge",
            "The metric exposes the VM labels as Prometheus labels. Configure allowed and ignored labels via the 'kubevirt-vm-labels-config' ConfigMap.",
        ),
    ),
    "virt-handler": (
        _m(
            "kubevirt_virt_handler_ready_status",
            "gauge",
            "Indication for a virt-handler that is ready to serve requests.",
        ),
        _m(
            "kubevirt_vmi_storage_iops_read_total",
            "counter",
            "Total number of I/O read operations.",
        ),
        _m(
            "kubevirt_vmi_storage_iops_write_total",
            "counter",
            "Total number of I/O write operations.",
        ),
        _m(
            "kubevirt_vmi_storage_read_traffic_bytes_total",
            "counter",
            "Total number of bytes read from storage.",
        ),
        _m(
            "kubevirt_vmi_storage_write_traffic_bytes_total",
            "counter",
            "Total number of written bytes.",
        ),
        _m(
            "kubevirt_vmi_storage_read_times_seconds_total",
            "counter",
            "Total time spent on read operations.",
        ),
        _m(
            "kubevirt_vmi_storage_write_times_seconds_total",
            "counter",
            "Total time spent on write operations.",
        ),
        _m(
            "kubevirt_vmi_storage_flush_requests_total",
            "counter",
            "Total storage flush requests.",
        ),
        _m(
            "kubevirt_vmi_storage_flush_times_seconds_total",
            "counter",
            "Total time spent on cache flushing.",
        ),
        _m(
            "kubevirt_vmi_cpu_usage_seconds_total",
            "counter",
            "Total CPU time spent in all modes (sum of both vcpu and hypervisor usage).",
        ),
        _m(
            "kubevirt_vmi_cpu_user_usage_seconds_total",
            "counter",
            "Total CPU time spent in user mode.",
        ),
        _m(
            "kubevirt_vmi_cpu_system_usage_seconds_total",
            "counter",
            "Total CPU time spent in system mode.",
        ),
        _m(
            "kubevirt_vmi_guest_load_1m",
            "gauge",
            "Guest system load average over 1 minute as reported by the guest agent. Load is defined as the number of processes in the runqueue or waiting for disk I/O. Requires qemu-guest-agent version 10.0.0 or above.",
        ),
        _m(
            "kubevirt_vmi_guest_load_5m",
            "gauge",
            "Guest system load average over 5 minutes as reported by the guest agent. Load is defined as the number of processes in the runqueue or waiting for disk I/O. Requires qemu-guest-agent version 10.0.0 or above.",
        ),
        _m(
            "kubevirt_vmi_guest_load_15m",
            "gauge",
            "Guest system load average over 15 minutes as reported by the guest agent. Load is defined as the number of processes in the runqueue or waiting for disk I/O. Requires qemu-guest-agent version 10.0.0 or above.",
        ),
        _m(
            "kubevirt_vmi_dirty_rate_bytes_per_second",
            "gauge",
            "Guest dirty-rate in bytes per second.",
        ),
        _m(
            "kubevirt_vmi_filesystem_capacity_bytes",
            "gauge",
            "Total VM filesystem capacity in bytes.",
        ),
        _m(
            "kubevirt_vmi_filesystem_used_bytes",
            "gauge",
            "Used VM filesystem capacity in bytes.",
        ),
        _m(
            "kubevirt_vmi_memory_resident_bytes",
            "gauge",
            "Resident set size of the process running the domain.",
        ),
        _m(
            "kubevirt_vmi_memory_available_bytes",
            "gauge",
            "Amount of usable memory as seen by the domain. This value may not be accurate if a balloon driver is in use or if the guest OS does not initialize all assigned pages",
        ),
        _m(
            "kubevirt_vmi_memory_unused_bytes",
            "gauge",
            "The amount of memory left completely unused by the system. Memory that is available but used for reclaimable caches should NOT be reported as free.",
        ),
        _m(
            "kubevirt_vmi_memory_cached_bytes",
            "gauge",
            "The amount of memory that is being used to cache I/O and is available to be reclaimed, corresponds to the sum of `Buffers` + `Cached` + `SwapCached` in `/proc/meminfo`.",
        ),
        _m(
            "kubevirt_vmi_memory_swap_in_traffic_bytes",
            "gauge",
            "The total amount of data read from swap space of the guest in bytes.",
        ),
        _m(
            "kubevirt_vmi_memory_swap_out_traffic_bytes",
            "gauge",
            "The total amount of memory written out to swap space of the guest in bytes.",
        ),
        _m(
            "kubevirt_vmi_memory_pgmajfault_total",
            "counter",
            "The number of page faults when disk IO was required. Page faults occur when a process makes a valid access to virtual memory that is not available. When servicing the page fault, if disk IO is required, it is considered as major fault.",
        ),
        _m(
            "kubevirt_vmi_memory_pgminfault_total",
            "counter",
            "The number of other page faults, when disk IO was not required. Page faults occur when a process makes a valid access to virtual memory that is not available. When servicing the page fault, if disk IO is NOT required, it is considered as minor fault.",
        ),
        _m(
            "kubevirt_vmi_memory_actual_balloon_bytes",
            "gauge",
            "Current balloon size in bytes.",
        ),
        _m(
            "kubevirt_vmi_memory_usable_bytes",
            "gauge",
            "The amount of memory which can be reclaimed by balloon without pushing the guest system to swap, corresponds to 'Available' in /proc/meminfo.",
        ),
        _m(
            "kubevirt_vmi_memory_domain_bytes",
            "gauge",
            "The amount of memory in bytes allocated to the domain. The `memory` value in domain xml file.",
        ),
        _m(
            "kubevirt_vmi_network_traffic_bytes_total",
            "counter",
            "[Deprecated] Total number of bytes sent and received.",
        ),
        _m(
            "kubevirt_vmi_network_receive_bytes_total",
            "counter",
            "Total network traffic received in bytes.",
        ),
        _m(
            "kubevirt_vmi_network_transmit_bytes_total",
            "counter",
            "Total network traffic transmitted in bytes.",
        ),
        _m(
            "kubevirt_vmi_network_receive_packets_total",
            "counter",
            "Total network traffic received packets.",
        ),
        _m(
            "kubevirt_vmi_network_transmit_packets_total",
            "counter",
            "Total network traffic transmitted packets.",
        ),
        _m(
            "kubevirt_vmi_network_receive_errors_total",
            "counter",
            "Total network received error packets.",
        ),
        _m(
            "kubevirt_vmi_network_transmit_errors_total",
            "counter",
            "Total network transmitted error packets.",
        ),
        _m(
            "kubevirt_vmi_network_receive_packets_dropped_total",
            "counter",
            "The total number of rx packets dropped on vNIC interfaces.",
        ),
        _m(
            "kubevirt_vmi_network_transmit_packets_dropped_total",
            "counter",
            "The total number of tx packets dropped on vNIC interfaces.",
        ),
        _m(
            "kubevirt_vmi_node_cpu_affinity",
            "gauge",
            "Number of VMI CPU affinities to node physical cores.",
        ),
        _m(
            "kubevirt_vmi_vcpu_seconds_total",
            "counter",
            "Total amount of time spent in each state by each vcpu (cpu_time excluding hypervisor time). Where `id` is the vcpu identifier and `state` can be one of the following: [`OFFLINE`, `RUNNING`, `BLOCKED`].",
        ),
        _m(
            "kubevirt_vmi_vcpu_wait_seconds_total",
            "counter",
            "Amount of time spent by each vcpu while waiting on I/O.",
        ),
        _m(
            "kubevirt_vmi_vcpu_delay_seconds_total",
            "counter",
            "Amount of time spent by each vcpu waiting in the queue instead of running.",
        ),
        _m(
            "kubevirt_vmi_gpu_info",
            "gauge",
            "Info metric mapping GPU/vGPU UUIDs to VMIs.",
        ),
        _m(
            "kubevirt_vmi_guest_os_panic_total",
            "counter",
            "Total number of guest OS panic events detected, partitioned by VMI and panic type.",
        ),
        _m(
            "kubevirt_node_deprecated_machine_types",
            "gauge",
            "List of deprecated machine types based on the capabilities of individual nodes, as detected by virt-handler.",
        ),
        _m(
            "kubevirt_vmi_migration_data_bytes_total",
            "counter",
            "The total Guest OS data to be migrated to the new VM.",
        ),
        _m(
            "kubevirt_vmi_migration_data_remaining_bytes",
            "gauge",
            "The remaining guest OS data to be migrated to the new VM.",
        ),
        _m(
            "kubevirt_vmi_migration_data_processed_bytes",
            "gauge",
            "The total Guest OS data processed and migrated to the new VM.",
        ),
        _m(
            "kubevirt_vmi_migration_dirty_memory_rate_bytes",
            "gauge",
            "The rate of memory being dirty in the Guest OS.",
        ),
        _m(
            "kubevirt_vmi_migration_memory_transfer_rate_bytes",
            "gauge",
            "The rate at which the memory is being transferred.",
        ),
        _m(
            "kubevirt_info",
            "gauge",
            "Version information.",
        ),
    ),
    "virt-operator": (
        _m(
            "kubevirt_virt_operator_leading_status",
            "gauge",
            "Indication for an operating virt-operator.",
        ),
        _m(
            "kubevirt_virt_operator_ready_status",
            "gauge",
            "Indication for a virt-operator that is ready to take the lead.",
        ),
        _m(
            "kubevirt_configuration_emulation_enabled",
            "gauge",
            "Indicates whether the Software Emulation is enabled in the configuration.",
        ),
    ),
}

#: The shared groups each component registers besides its own.
SHARED_GROUPS: Final[dict[str, tuple[str, ...]]] = {
    "virt-api": ("rest_client", "workqueue"),
    "virt-controller": ("rest_client", "workqueue", "vmisync"),
    "virt-handler": ("rest_client", "workqueue", "vmisync"),
    "virt-operator": ("rest_client", "workqueue"),
}
COMPONENTS: Final = tuple(SHARED_GROUPS)


def upstream_metrics_of(component: str) -> tuple[UpstreamMetric, ...]:
    """Everything ``component`` serves upstream: its own metrics, then the shared ones."""
    groups = (component, *SHARED_GROUPS[component])
    return tuple(metric for group in groups for metric in UPSTREAM_METRICS[group])
