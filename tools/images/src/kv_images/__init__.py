"""Builds kubevirt-py container images without a daemon.

Public surface: `Builder(find_workspace(), Layout.default(), Progress()).build(names)` builds
catalog images (bases first, cached by content key) and returns `BuiltImage`s;
`Builder.import_into(images, socket)` imports them into a containerd (namespace k8s.io),
tagged `<ref>` and its `aliases`; `Builder.push_to(images, HttpRegistry(endpoint))` pushes
them to a registry instead (what nodes pull from), sending only what it lacks. `guest` holds the tiny test
guest's markers (GUEST_MARKER printed on ttyS0) and `GuestLease.from_console(text)`, the DHCP
lease it printed; `ensure_guest(find_guest_kernel(), layout,
progress)` returns the cached dir holding its vmlinuz, initrd.img and disk.qcow2.
"""

from kv_images.buildah import BuildError
from kv_images.builder import DEV_TAG, LATEST_TAG, Builder, BuiltImage, aliases, read_index
from kv_images.catalog import CATALOG, SERVICES, UPSTREAM_ALIASES, ImageSpec, repository
from kv_images.contexts import ensure_guest
from kv_images.guest import (
    GUEST_HTTP_PAGE,
    GUEST_IP_MARKER,
    GUEST_LEASE_MARKER,
    GUEST_MARKER,
    GUEST_POWEROFF_MARKER,
    GUEST_SSH_KEYS_MARKER,
    GuestKernel,
    GuestLease,
    find_guest_kernel,
)
from kv_images.host import HostError
from kv_images.progress import Progress
from kv_images.registry import (
    ENDPOINT_FILE,
    HttpRegistry,
    PushResult,
    RegistryApi,
    RegistryEndpoint,
    RegistryError,
    local_registry,
    split_ref,
)
from kv_images.workspace import Layout, cluster_state_dir, find_workspace

__all__ = [
    "CATALOG",
    "DEV_TAG",
    "ENDPOINT_FILE",
    "GUEST_HTTP_PAGE",
    "GUEST_IP_MARKER",
    "GUEST_LEASE_MARKER",
    "GUEST_MARKER",
    "GUEST_POWEROFF_MARKER",
    "GUEST_SSH_KEYS_MARKER",
    "LATEST_TAG",
    "SERVICES",
    "UPSTREAM_ALIASES",
    "BuildError",
    "Builder",
    "BuiltImage",
    "GuestKernel",
    "GuestLease",
    "HostError",
    "HttpRegistry",
    "ImageSpec",
    "Layout",
    "Progress",
    "PushResult",
    "RegistryApi",
    "RegistryEndpoint",
    "RegistryError",
    "aliases",
    "cluster_state_dir",
    "ensure_guest",
    "find_guest_kernel",
    "find_workspace",
    "local_registry",
    "read_index",
    "repository",
    "split_ref",
]
