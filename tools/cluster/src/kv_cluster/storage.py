"""The cluster's default StorageClass: Rancher's local-path-provisioner, built from the Go
module proxy.

`local-path` (provisioner `rancher.io/local-path`, `volumeBindingMode: WaitForFirstConsumer`,
reclaim `Delete`) is the default StorageClass once a node runs. A claim gets a directory on
the node its first pod is scheduled to (`<state>/nodes/<node>/local-path/pvc-…`: the nodes
share this host's filesystem, so each has its own root and a volume is never visible from
another node), as a hostPath PersistentVolume with that node's affinity. Filesystem volumes
only: upstream's provisioner makes no Block volumes. For those, `local-block` (no
provisioner) has a few static Block PersistentVolumes per node, each a loop device over a
sparse file in `<state>/nodes/<node>/local-block/`; `down` detaches them.

The provisioner runs as a host process (like the registry) with the cluster admin's
kubeconfig. It creates and removes the directories through a helper pod on the node; its
image is `local-path-helper` (Debian's busybox-static, FROM scratch, kv_images), pushed to
the cluster's registry, so the node pulls nothing from outside.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from kv_images import Builder, BuildError, HostError, HttpRegistry, Layout, Progress, find_workspace

from kv_cluster.components import ClusterContext, Component, ComponentError
from kv_cluster.gobuild import GoBuild, ensure_built
from kv_cluster.health import Health
from kv_cluster.kubectl import Kubectl, KubectlError
from kv_cluster.nodes import NodeSpec, node_specs, read_node_count
from kv_cluster.plan import APISERVER, NODE, REGISTRY, STORAGE_CLASS
from kv_cluster.registry import registry_endpoint

__all__ = [
    "BLOCK_STORAGE_CLASS_NAME",
    "BLOCK_VOLUMES_PER_NODE",
    "BLOCK_VOLUME_BYTES",
    "HELPER_IMAGE",
    "LOCAL_PATH_VERSION",
    "NAMESPACE",
    "STORAGE_CLASS_NAME",
    "LocalPathProvisioner",
    "local_path_build",
    "local_path_root",
    "render_block_volume",
    "render_storage_objects",
    "storage_components",
]

LOCAL_PATH_VERSION = "v0.0.30"
_MODULE = "github.com/rancher/local-path-provisioner"
PROVISIONER_NAME = "rancher.io/local-path"
NAMESPACE = "local-path-storage"
STORAGE_CLASS_NAME = "local-path"
HELPER_IMAGE = "local-path-helper"
BLOCK_STORAGE_CLASS_NAME = "local-block"
BLOCK_VOLUMES_PER_NODE = 2
BLOCK_VOLUME_BYTES = 256 << 20
_SERVICE_ACCOUNT = "local-path-provisioner-service-account"
_CONFIG_MAP = "local-path-config"
_FIELD_MANAGER = "kv-cluster"
# Upstream's scripts (deploy/local-path-storage.yaml): a world-writable directory, so the
# launcher (uid 107) can create its disk.img in it.
_SETUP = '#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n'
_TEARDOWN = '#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n'
# Written by client-go once the controller's informers run.
_STARTED = "Started provisioner controller"
_START_MARK = "==== kv-cluster: starting"


def local_path_build(version: str = LOCAL_PATH_VERSION) -> GoBuild:
    """`local-path-provisioner` at `version`, cached like Kubernetes and the registry."""
    return GoBuild(
        name="local-path-provisioner",
        version=version,
        requires=((_MODULE, version),),
        packages=(_MODULE,),
        module="kubevirtpy.local/localpathbuild",
    )


def local_path_root(node: NodeSpec) -> Path:
    """The directory a node's local-path volumes are created in."""
    return node.root / "local-path"


def _helper_pod(helper_ref: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "priorityClassName": "system-node-critical",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/disk-pressure",
                    "operator": "Exists",
                    "effect": "NoSchedule",
                }
            ],
            "containers": [
                {"name": "helper-pod", "image": helper_ref, "imagePullPolicy": "IfNotPresent"}
            ],
        },
    }


def render_config(nodes: list[NodeSpec]) -> dict[str, Any]:
    """config.json: one path per node; a node not listed gets no volumes (its provisioning
    fails with the provisioner's reason) rather than a path another node also uses."""
    return {"nodePathMap": [{"node": n.name, "paths": [str(local_path_root(n))]} for n in nodes]}


def render_storage_objects(nodes: list[NodeSpec], helper_ref: str) -> list[dict[str, Any]]:
    """The namespace, service account, ConfigMap and default StorageClass, as upstream's
    deploy/local-path-storage.yaml has them (the provisioner itself runs on the host)."""
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": _CONFIG_MAP, "namespace": NAMESPACE},
        "data": {
            "config.json": json.dumps(render_config(nodes), indent=2),
            "setup": _SETUP,
            "teardown": _TEARDOWN,
            "helperPod.yaml": yaml.safe_dump(_helper_pod(helper_ref), sort_keys=False),
        },
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": _SERVICE_ACCOUNT, "namespace": NAMESPACE},
        },
        config_map,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS_NAME,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": PROVISIONER_NAME,
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        },
    ]


def render_block_volume(node: NodeSpec, index: int, device: str) -> dict[str, Any]:
    """A static Block PV on `device` (a loop device) that only pods on `node` can use."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"{BLOCK_STORAGE_CLASS_NAME}-{node.name}-{index}",
            "labels": {"kubevirt-py.io/node": node.name},
        },
        "spec": {
            "capacity": {"storage": f"{BLOCK_VOLUME_BYTES >> 20}Mi"},
            "volumeMode": "Block",
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": BLOCK_STORAGE_CLASS_NAME,
            "local": {"path": device},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node.name],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def _block_storage_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": BLOCK_STORAGE_CLASS_NAME},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def _losetup(*args: str) -> str:
    done = subprocess.run(["losetup", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ComponentError(f"losetup {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _loop_device(backing: Path) -> str:
    """The loop device over `backing`, attached now unless one already is."""
    if not backing.exists():
        backing.parent.mkdir(parents=True, exist_ok=True)
        with backing.open("wb") as out:
            out.truncate(BLOCK_VOLUME_BYTES)
    attached = _losetup("-j", str(backing))
    if attached:
        return attached.split(":", 1)[0]
    return _losetup("-f", "--show", str(backing))


class LocalPathProvisioner(Component):
    """The provisioner process; `ensure` builds it and its helper image, applies the
    StorageClass and its ConfigMap, then starts it."""

    name = "local-path-provisioner"
    requires = frozenset({APISERVER, NODE, REGISTRY})
    provides = frozenset({STORAGE_CLASS})
    startup_timeout = 60.0

    def __init__(self, ctx: ClusterContext, nodes: list[NodeSpec]) -> None:
        super().__init__(ctx)
        self.nodes = nodes
        self.kubectl = Kubectl(ctx.layout.admin_kubeconfig)
        # Set by `ensure` (built and pushed) before `start` asks for argv.
        self.helper_image = ""

    @property
    def binary(self) -> Path:
        return local_path_build().binary(self.ctx.config.cache_dir, "local-path-provisioner")

    @property
    def config_file(self) -> Path:
        return self.ctx.layout.data(self.name) / "config.json"

    def _block_volumes(self) -> list[dict[str, Any]]:
        volumes = []
        for node in self.nodes:
            for index in range(BLOCK_VOLUMES_PER_NODE):
                backing = node.root / BLOCK_STORAGE_CLASS_NAME / f"volume-{index}.img"
                volumes.append(render_block_volume(node, index, _loop_device(backing)))
        return volumes

    def _detach_loops(self) -> None:
        """Detach every loop device over a file of this cluster's state dir: the Block
        volumes' and those kubelet attaches over a mapped volume (it locks a device so)."""
        try:
            listed = json.loads(_losetup("--list", "--json", "--output", "NAME,BACK-FILE") or "{}")
        except (ComponentError, ValueError):
            return
        root = str(self.ctx.layout.root) + "/"
        for device in listed.get("loopdevices") or ():
            back = str(device.get("back-file") or "").removesuffix(" (deleted)")
            if back.startswith(root):
                # Detached meanwhile, or busy: the kernel frees it once released.
                with contextlib.suppress(ComponentError):
                    _losetup("-d", str(device["name"]))

    def _helper_ref(self) -> str:
        try:
            builder = Builder(find_workspace(), Layout.default(), Progress())
            built = builder.build([HELPER_IMAGE])
            builder.push_to(built, HttpRegistry(registry_endpoint(self.ctx)))
        except (BuildError, HostError, FileNotFoundError) as exc:
            raise ComponentError(f"building the {HELPER_IMAGE} image failed: {exc}") from None
        return next(b.ref for b in built if b.name == HELPER_IMAGE)

    def prepare(self) -> None:
        data = self.ctx.layout.data(self.name)
        data.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(json.dumps(render_config(self.nodes), indent=2) + "\n")
        for node in self.nodes:
            local_path_root(node).mkdir(parents=True, exist_ok=True)

    def argv(self) -> list[str]:
        host = self.ctx.config.host_ip
        return [
            "/usr/bin/env",
            # It talks to the apiserver only; anything else would reach a closed port.
            "HTTP_PROXY=http://127.0.0.1:1",
            "HTTPS_PROXY=http://127.0.0.1:1",
            f"NO_PROXY={host}",
            str(self.binary),
            "start",
            f"--kubeconfig={self.ctx.layout.admin_kubeconfig}",
            f"--namespace={NAMESPACE}",
            f"--provisioner-name={PROVISIONER_NAME}",
            f"--configmap-name={_CONFIG_MAP}",
            f"--config={self.config_file}",
            f"--service-account-name={_SERVICE_ACCOUNT}",
            f"--helper-image={self.helper_image}",
        ]

    def listens(self) -> list[tuple[str, int]]:
        return []

    def health(self) -> Health:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return Health(False, "no log yet")
        if _STARTED not in text.rsplit(_START_MARK, 1)[-1]:
            return Health(False, "the provisioner controller has not started yet")
        try:
            self.kubectl.run("get", "storageclass", STORAGE_CLASS_NAME, "-o", "name")
        except KubectlError as exc:
            return Health(False, f"StorageClass {STORAGE_CLASS_NAME}: {exc}")
        return Health(
            True, f"provisioning {PROVISIONER_NAME} (default StorageClass {STORAGE_CLASS_NAME})"
        )

    def ensure(self) -> str:
        ensure_built(local_path_build(), self.ctx.config.cache_dir)
        self.helper_image = self._helper_ref()
        items = render_storage_objects(self.nodes, self.helper_image)
        items += [_block_storage_class(), *self._block_volumes()]
        self.kubectl.run(
            "apply",
            "--server-side",
            f"--field-manager={_FIELD_MANAGER}",
            "--force-conflicts",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        )
        record = self.record()
        if record is not None and record.alive():
            previous = self.config_file.read_text() if self.config_file.exists() else ""
            wanted = json.dumps(render_config(self.nodes), indent=2) + "\n"
            if previous != wanted or _helper_arg(record.argv) != self.helper_image:
                # A node added or a new helper image: start with the new config (the
                # Block volumes stay attached).
                super().stop()
        return super().ensure()

    def stop(self) -> bool:
        """Stop the provisioner and detach the Block volumes' loop devices (`down`)."""
        stopped = super().stop()
        self._detach_loops()
        return stopped


def _helper_arg(argv: Sequence[str]) -> str:
    return next((a.split("=", 1)[1] for a in argv if a.startswith("--helper-image=")), "")


def storage_components(ctx: ClusterContext, nodes: int | None = None) -> list[Component]:
    """The provisioner when the cluster has nodes (or one still runs, for status and down)."""
    count = read_node_count(ctx.layout) if nodes is None else nodes
    specs = node_specs(ctx.config, ctx.layout, count) if count > 0 else []
    provisioner = LocalPathProvisioner(ctx, specs)
    record = provisioner.record()
    if specs or (record is not None and record.alive()):
        return [provisioner]
    return []
