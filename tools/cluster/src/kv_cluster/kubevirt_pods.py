"""KubeVirt's components as pods of the local cluster, from the project's own images.

`KV_CLUSTER_KUBEVIRT=pods` (a developer mode; with at least one node) makes `up` build the service
images (cached by content) and push them to the cluster's registry (nodes pull them), create the `kubevirt` namespace, the TLS material as
Secrets, server-side apply virt-operator's components/virt-{api,controller,handler} with the content-tagged
image references and CA bundles put in, wait until the workloads are Ready and the
APIService is Available, and create the KubeVirt CR. `host` runs the same programs as
host processes (kv_cluster.kubevirt, kv_cluster.virt_node).

Node paths: each node's kubelet root is `<state>/nodes/<node>/kubelet/root`, not
/var/lib/kubelet. The one virt-handler DaemonSet mounts `<state>/nodes` at the same path
and passes `--kubelet-root=<state>/nodes/$(NODE_NAME)/kubelet/root`, so every handler
uses its own node's root even with several nodes on one host.

API server: the pods get KUBERNETES_SERVICE_HOST/PORT = the cluster's host address and
the apiserver port (its serving cert names that address), so they do not depend on
kube-proxy's translation of the `kubernetes` Service (a cluster may run without one).
"""

from __future__ import annotations

import base64
import copy
import http.client
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kv_images import Builder, BuildError, HostError, HttpRegistry, Layout, Progress, find_workspace
from virt_operator.components import COMPONENTS_DIR

from kv_cluster.components import ClusterContext, Component, ComponentError, ComponentStatus
from kv_cluster.health import Health
from kv_cluster.kubectl import Kubectl, KubectlError
from kv_cluster.nodes import NodeSpec, node_specs, read_node_count
from kv_cluster.pki import CertificateAuthority
from kv_cluster.plan import (
    CONTROLLER_MANAGER,
    KUBEVIRT_ADMISSION,
    KUBEVIRT_CONFIG,
    KUBEVIRT_CRDS,
    NODE,
    REGISTRY,
    SCHEDULER,
)
from kv_cluster.process import ProcessRecord, stop_process
from kv_cluster.readiness import pod_reason
from kv_cluster.registry import registry_endpoint

__all__ = [
    "IMAGES",
    "KubevirtPods",
    "PodHandler",
    "handler_daemonset",
    "kubevirt_mode",
    "operator_mode",
    "pods_mode",
    "render_workloads",
    "runs_as_pods",
    "virt_api_ca_file",
    "virt_api_host_port",
]

NAMESPACE = "kubevirt"
FIELD_MANAGER = "kv-cluster"
IMAGES = ("virt-api", "virt-controller", "virt-handler", "virt-launcher")
APISERVICES = ("v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io")
HOST_COMPONENTS = ("virt-api", "virt-controller")  # plus virt-handler-<node>
VIRT_API_PORT_OFFSET = 20  # kv_cluster.kubevirt's: host mode listens there too
HANDLER_METRICS_PORT = 8443  # --metrics-port in virt-handler's daemonset.yaml


def kubevirt_mode() -> str:
    """`operator` (the default: the release manifests and virt-operator, as users install),
    `pods` or `host` (developer modes) from KV_CLUSTER_KUBEVIRT; anything else is an error."""
    mode = os.environ.get("KV_CLUSTER_KUBEVIRT", "operator")
    if mode not in ("host", "pods", "operator"):
        raise ComponentError(
            f"KV_CLUSTER_KUBEVIRT must be `host`, `pods` or `operator`, not {mode!r}"
        )
    return mode


def pods_mode(ctx: ClusterContext) -> bool:
    """True when KubeVirt runs as pods: mode `pods`, a node, and no component left out
    (KV_CLUSTER_VIRT_API=0 / KV_CLUSTER_VIRT_NODE=0 keep their host-mode meaning)."""
    left_out = any(
        os.environ.get(v) == "0" for v in ("KV_CLUSTER_VIRT_API", "KV_CLUSTER_VIRT_NODE")
    )
    return kubevirt_mode() == "pods" and not left_out and read_node_count(ctx.layout) > 0


def operator_mode(ctx: ClusterContext) -> bool:
    """True when virt-operator installs KubeVirt (mode `operator`, a node, nothing left out)."""
    left_out = any(
        os.environ.get(v) == "0" for v in ("KV_CLUSTER_VIRT_API", "KV_CLUSTER_VIRT_NODE")
    )
    return kubevirt_mode() == "operator" and not left_out and read_node_count(ctx.layout) > 0


def runs_as_pods(ctx: ClusterContext) -> bool:
    """KubeVirt's components run as pods of the cluster: installed by virt-operator or by
    pods mode (not host processes)."""
    return operator_mode(ctx) or pods_mode(ctx)


def virt_api_ca_file(ctx: ClusterContext) -> Path:
    """The CA bundle that verifies virt-api's serving certificate: kv-cluster's own (host
    and pods mode), or the operator's `kubevirt-ca` bundle, which operator mode copies here."""
    name = "kubevirt-ca.crt" if operator_mode(ctx) else "virt-api-ca.crt"
    return ctx.layout.pki / name


def _manifests() -> Path:
    # The components' manifests live with virt-operator, which installs them too.
    return COMPONENTS_DIR


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def _api_env(ctx: ClusterContext) -> list[dict[str, str]]:
    return [
        {"name": "KUBERNETES_SERVICE_HOST", "value": ctx.config.host_ip},
        {"name": "KUBERNETES_SERVICE_PORT", "value": str(ctx.config.ports.apiserver)},
    ]


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = doc["spec"]["template"]["spec"]["containers"]
    return containers[0]


def _with_env(container: dict[str, Any], env: list[dict[str, str]]) -> None:
    names = {e["name"] for e in env}
    kept = [e for e in container.get("env", []) if e.get("name") not in names]
    container["env"] = kept + env


def handler_daemonset(doc: dict[str, Any], nodes_root: Path, logs: Path) -> dict[str, Any]:
    """The virt-handler DaemonSet with this cluster's node paths instead of /var/lib/kubelet.

    `<state>/nodes` is mounted at the same path (socket paths agree with the host's) and
    each handler picks its node's kubelet root and runtime dir by $(NODE_NAME). Its output
    is also appended to `<logs>/virt-handler-<node>.log`, the file host mode writes, so
    one place holds a node's handler log across container restarts.
    """
    out = copy.deepcopy(doc)
    spec = out["spec"]["template"]["spec"]
    container = _container(out)
    per_node = f"{nodes_root}/$(NODE_NAME)"
    flags = {
        "--kubelet-root": f"{per_node}/kubelet/root",
        "--runtime-dir": f"{per_node}/kubevirt",
    }
    args = []
    for arg in container.get("args", []):
        flag = arg.split("=", 1)[0]
        args.append(f"{flag}={flags[flag]}" if flag in flags else arg)
    log = f"{logs}/virt-handler-$(NODE_NAME).log"
    container["command"] = [
        "/bin/sh",
        "-c",
        # The shell is PID 1 (no default TERM action): it passes TERM on to the group.
        'trap "trap - TERM; kill 0" TERM; '
        'python3 -m virt_handler "$@" 2>&1 | tee -a "$HANDLER_LOG" & wait',
        "virt-handler",
    ]
    container["args"] = args
    _with_env(
        container,
        [{"name": "HANDLER_LOG", "value": log}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
    )
    host_paths = {"kubelet", "kubevirt-runtime"}
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in host_paths] + [
        {"name": "nodes", "hostPath": {"path": str(nodes_root), "type": "Directory"}},
        {"name": "logs", "hostPath": {"path": str(logs), "type": "Directory"}},
    ]
    container["volumeMounts"] = [
        m for m in container["volumeMounts"] if m["name"] not in host_paths
    ] + [
        # No HostToContainer: this host's / is a private mount, which containerd refuses
        # for it. Launcher sockets live in emptyDir directories (not mounts), so the
        # handler sees them without propagation.
        {"name": "nodes", "mountPath": str(nodes_root)},
        {"name": "logs", "mountPath": str(logs)},
    ]
    return out


def virt_api_host_port(doc: dict[str, Any], ctx: ClusterContext) -> None:
    """virt-api also published on the host address at base+20 (CNI portmap), where host
    mode listens: host tools and tests reach virt-api at one address in every mode."""
    # The hostPort is held by the running pod: replace it, never run two.
    doc["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }
    for port in _container(doc).get("ports", []):
        if port.get("name") == "https":
            port["hostIP"] = ctx.config.host_ip
            port["hostPort"] = ctx.config.ports.base + VIRT_API_PORT_OFFSET


def render_workloads(ctx: ClusterContext, refs: dict[str, str]) -> list[dict[str, Any]]:
    """RBAC, Service and workloads of the three services, with image refs and node paths."""
    root = _manifests()
    api_env = _api_env(ctx)
    items: list[dict[str, Any]] = []
    items += _load(root / "virt-api" / "namespace.yaml")
    for service in ("virt-api", "virt-controller", "virt-handler"):
        items += _load(root / service / "rbac.yaml")
    items += _load(root / "virt-api" / "service.yaml")
    for doc in _load(root / "virt-api" / "deployment.yaml"):
        container = _container(doc)
        container["image"] = refs["virt-api"]
        _with_env(container, api_env)
        virt_api_host_port(doc, ctx)
        items.append(doc)
    for doc in _load(root / "virt-controller" / "deployment.yaml"):
        container = _container(doc)
        container["image"] = refs["virt-controller"]
        container["args"] = [
            a for a in container.get("args", []) if not a.startswith("--launcher-image=")
        ] + [f"--launcher-image={refs['virt-launcher']}"]
        _with_env(container, api_env)
        items.append(doc)
    for doc in _load(root / "virt-handler" / "daemonset.yaml"):
        doc = handler_daemonset(doc, ctx.layout.root / "nodes", ctx.layout.root / "logs")
        _container(doc)["image"] = refs["virt-handler"]
        _with_env(_container(doc), api_env)
        items.append(doc)
    return items


def _secret(name: str, files: dict[str, bytes]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls" if "tls.crt" in files else "Opaque",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {k: base64.b64encode(v).decode() for k, v in files.items()},
    }


class KubevirtPods(Component):
    """virt-api, virt-controller and virt-handler as pods; `ensure` is idempotent."""

    name = "kubevirt"
    startup_timeout = 600.0
    requires = frozenset(
        {KUBEVIRT_CRDS, KUBEVIRT_CONFIG, NODE, SCHEDULER, CONTROLLER_MANAGER, REGISTRY}
    )
    provides = frozenset({KUBEVIRT_ADMISSION})

    def __init__(self, ctx: ClusterContext) -> None:
        super().__init__(ctx)
        self.kubectl = Kubectl(ctx.layout.admin_kubeconfig)

    # Not a process: no argv, ports or pid record.
    def argv(self) -> list[str]:
        return []

    def listens(self) -> list[tuple[str, int]]:
        return []

    def _say(self, message: str) -> None:
        print(f"kv-cluster: kubevirt: {message}", file=sys.stderr, flush=True)

    # -- TLS ---------------------------------------------------------------------------
    def _api_ca(self) -> CertificateAuthority:
        # The same CA and serving cert the host mode uses: switching modes keeps caBundles.
        return CertificateAuthority.load_or_create(
            self.ctx.layout.pki, "virt-api-ca", "kubevirt-py-virt-api-ca"
        )

    def _relay_ca(self) -> CertificateAuthority:
        # Only the relay: virt-api's client cert and the handlers' serving cert.
        return CertificateAuthority.load_or_create(
            self.ctx.layout.pki, "virt-handler-relay-ca", "kubevirt-py-virt-handler-relay-ca"
        )

    def _tls_objects(self) -> list[dict[str, Any]]:
        pki = self.ctx.layout.pki
        service = f"virt-api.{NAMESPACE}"
        api = self._api_ca().issue(
            pki,
            "virt-api",
            f"{service}.svc",
            server=True,
            dns_names=[f"{service}.svc", f"{service}.svc.cluster.local", service, "virt-api"],
            ip_addresses=[self.ctx.config.host_ip],
        )
        relay = self._relay_ca()
        # Both usages: handlers are each other's clients for live migration's mutual TLS.
        handler = relay.issue(pki, "virt-handler-relay", "virt-handler", server=True, client=True)
        client = relay.issue(pki, "virt-api-relay-client", "virt-api", client=True)

        def pair(paths: Any) -> dict[str, bytes]:
            return {"tls.crt": paths.cert.read_bytes(), "tls.key": paths.key.read_bytes()}

        return [
            _secret("kubevirt-virt-api-certs", pair(api)),
            _secret("kubevirt-virt-handler-certs", pair(handler)),
            _secret("kubevirt-virt-api-handler-client", {**pair(client), "ca.crt": relay.cert_pem}),
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kubevirt-virt-handler-client-ca", "namespace": NAMESPACE},
                "data": {"ca.crt": relay.cert_pem.decode()},
            },
        ]

    # -- steps -------------------------------------------------------------------------
    def _images(self) -> dict[str, str]:
        """Build (cached by content) and push to the cluster's registry, where the nodes pull
        from (a push the registry already has costs a HEAD per name); the content-tagged refs."""
        t0 = time.monotonic()
        try:
            builder = Builder(find_workspace(), Layout.default(), Progress())
            built = builder.build(IMAGES)
            builder.push_to(built, HttpRegistry(registry_endpoint(self.ctx)))
        except (BuildError, HostError, FileNotFoundError) as exc:
            raise ComponentError(f"building KubeVirt's images failed: {exc}") from None
        refs = {b.name: b.ref for b in built if b.name in IMAGES}
        self._say(f"images ready ({time.monotonic() - t0:.1f}s): " + ", ".join(refs.values()))
        return refs

    def _apply(self, items: list[dict[str, Any]]) -> None:
        self.kubectl.run(
            "apply",
            "--server-side",
            f"--field-manager={FIELD_MANAGER}",
            "--force-conflicts",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
        )

    def _stop_host_mode(self) -> None:
        """Host processes of the other mode give way (their Service endpoints too)."""
        names = [*HOST_COMPONENTS] + [
            f"virt-handler-{n.name}"
            for n in node_specs(self.ctx.config, self.ctx.layout, read_node_count(self.ctx.layout))
        ]
        stopped = []
        for name in names:
            pidfile = self.ctx.layout.pidfile(name)
            record = ProcessRecord.load(pidfile)
            if record is not None and record.alive():
                stop_process(record)
                stopped.append(name)
            pidfile.unlink(missing_ok=True)
        if stopped:
            self._say(f"stopped host processes of host mode: {', '.join(stopped)}")
        # The hand-written Endpoints pointed at the host process; the Service's selector
        # makes the endpoints controller write pod IPs instead.
        found = self.kubectl.run(
            "get", "endpoints", "virt-api", "-n", NAMESPACE, "-o", "json", check=False
        )
        if found.returncode == 0:
            ip = self.ctx.config.host_ip
            if ip in found.stdout:
                self.kubectl.run("delete", "endpoints", "virt-api", "-n", NAMESPACE, check=False)

    def _registrations(self) -> list[dict[str, Any]]:
        bundle = base64.b64encode(self._api_ca().cert_pem).decode()
        items = []
        for name in ("webhooks.yaml", "apiservice.yaml"):
            for doc in _load(_manifests() / "virt-api" / name):
                if doc["kind"] == "APIService":
                    doc["spec"]["caBundle"] = bundle
                else:
                    for hook in doc.get("webhooks", []):
                        hook["clientConfig"]["caBundle"] = bundle
                items.append(doc)
        return items

    def workloads(self) -> dict[str, str]:
        """Each workload's readiness in words; a key maps to "" when it is Ready."""
        found = self.kubectl.run(
            "get",
            "deployment/virt-api",
            "deployment/virt-controller",
            "daemonset/virt-handler",
            "-n",
            NAMESPACE,
            "-o",
            "json",
            "--ignore-not-found",
            check=False,
        )
        state = {
            "deployment/virt-api": "absent",
            "deployment/virt-controller": "absent",
            "daemonset/virt-handler": "absent",
        }
        if found.returncode != 0 or not found.stdout.strip():
            return state
        body = json.loads(found.stdout)
        for item in body.get("items", [body]):
            key = f"{item['kind'].lower()}/{item['metadata']['name']}"
            state[key] = _pending(item)
        return state

    def _apiservices(self) -> dict[str, str]:
        state = {}
        for name in APISERVICES:
            found = self.kubectl.run("get", "apiservice", name, "-o", "json", check=False)
            if found.returncode != 0:
                state[f"apiservice/{name}"] = "absent"
                continue
            conditions = json.loads(found.stdout).get("status", {}).get("conditions", [])
            avail = [c for c in conditions if c.get("type") == "Available"]
            ok = bool(avail) and avail[0].get("status") == "True"
            reason = avail[0].get("message") or avail[0].get("reason") if avail else "no status"
            state[f"apiservice/{name}"] = "" if ok else f"not Available ({reason})"
        return state

    def pod_reasons(self) -> list[str]:
        """Why each of KubeVirt's pods that is not Ready is not, in its own words."""
        found = self.kubectl.run(
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "kubevirt.io in (virt-api,virt-controller,virt-handler)",
            "-o",
            "json",
            check=False,
        )
        if found.returncode != 0:
            return [f"cannot list the pods: {found.stderr.strip()}"]
        reasons = (pod_reason(p) for p in json.loads(found.stdout).get("items", []))
        return [r for r in reasons if r]

    def _wait(self, probe: Any, what: str, timeout: float) -> None:
        """Poll `probe()` (name -> "" when ready, else why) and print each change."""
        deadline = time.monotonic() + timeout
        t0 = time.monotonic()
        last: dict[str, str] = {}
        while True:
            state = probe()
            if state != last:
                pending = {k: v for k, v in state.items() if v}
                ready = [k for k, v in state.items() if not v]
                line = "; ".join(f"{k}: {v}" for k, v in pending.items()) or "all ready"
                self._say(
                    f"{what} [{time.monotonic() - t0:.0f}s] ready {len(ready)}/{len(state)}: "
                    + line
                )
                last = state
            if not any(state.values()):
                return
            if time.monotonic() > deadline:
                raise ComponentError(
                    f"kubevirt: {what} not ready within {timeout:.0f}s: "
                    + "; ".join(f"{k}: {v}" for k, v in state.items() if v)
                    + "".join(f"\n  {reason}" for reason in self.pod_reasons())
                    + f"\n  see `kubectl -n {NAMESPACE} get pods,events`"
                )
            time.sleep(2.0)

    def ensure(self) -> str:
        """Images, namespace, Secrets, workloads, registration, KubeVirt CR; wait for Ready."""
        before = self.workloads()
        refs = self._images()
        self._stop_host_mode()
        namespace = _load(_manifests() / "virt-api" / "namespace.yaml")
        self._apply(namespace)
        self._apply(self._tls_objects() + render_workloads(self.ctx, refs))
        self._say("manifests applied (server-side, field manager kv-cluster)")
        self._wait(self.workloads, "workloads", self.startup_timeout)
        self.register()
        return "running" if not any(before.values()) else "deployed"

    def register(self, timeout: float = 120.0) -> None:
        """Apply the webhook configurations and APIServices with the CA; wait until Available."""
        try:
            self._apply(self._registrations())
            self._wait(self._apiservices, "APIService", timeout)
        except (KubectlError, ComponentError):
            self._unregister()  # fail-closed webhooks must not point at nothing
            raise

    @property
    def virt_api_port(self) -> int:
        """virt-api's port on the host address (its pod's hostPort)."""
        return self.ctx.config.ports.base + VIRT_API_PORT_OFFSET

    def health(self) -> Health:
        try:
            state = {**self.workloads(), **self._apiservices()}
        except (KubectlError, OSError, ValueError) as exc:
            return Health(False, f"{type(exc).__name__}: {exc}")
        pending = {k: v for k, v in state.items() if v}
        if pending:
            why = [f"{k}: {v}" for k, v in pending.items()] + self.pod_reasons()
            return Health(False, "; ".join(why))
        return Health(
            True, "pods ready: virt-api, virt-controller, virt-handler; APIService Available"
        )

    def status(self) -> ComponentStatus:
        health = (
            self.health()
            if self.ctx.layout.admin_kubeconfig.exists()
            else Health(False, "no kubeconfig")
        )
        return ComponentStatus(self.name, None, health.ok, health)

    def stop(self) -> bool:
        """Unregister (fail-closed webhooks must not outlive virt-api); pods go with the node."""
        if self.ctx.layout.admin_kubeconfig.exists():
            self._unregister()
        return False

    def _unregister(self) -> None:
        self.kubectl.run(
            "delete",
            "mutatingwebhookconfiguration/virt-api-mutator",
            "validatingwebhookconfiguration/virt-api-validator",
            *(f"apiservice/{n}" for n in APISERVICES),
            "--ignore-not-found",
            "--wait=false",
            check=False,
            timeout=20,
        )


def _pending(item: dict[str, Any]) -> str:
    """ "" when a Deployment/DaemonSet is Ready at its current generation, else why not."""
    meta, spec, status = item["metadata"], item.get("spec", {}), item.get("status", {})
    if status.get("observedGeneration", 0) < meta.get("generation", 1):
        return "update not yet observed"
    if item["kind"] == "DaemonSet":
        want = status.get("desiredNumberScheduled", 0)
        ready = status.get("numberReady", 0)
        updated = status.get("updatedNumberScheduled", 0)
        if want and ready >= want and updated >= want:
            return ""
        return f"{ready}/{want} ready, {updated} updated"
    # A Deployment: virt-controller is ready only on its leader, so one ready updated pod
    # (and no old pods) counts.
    want = spec.get("replicas", 1)
    ready = status.get("readyReplicas", 0)
    updated = status.get("updatedReplicas", 0)
    total = status.get("replicas", 0)
    if ready >= 1 and updated >= want and total <= want:
        return ""
    return f"{ready}/{want} ready, {updated} updated, {total} pods"


def _handler_process(kubelet_root: Path) -> ProcessRecord | None:
    """The host process of the handler container serving the node with `kubelet_root`."""
    wanted = f"--kubelet-root={kubelet_root}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"virt_handler" in argv and wanted in argv and argv[0].startswith(b"python"):
            record = ProcessRecord.from_pid(
                "virt-handler", int(proc.name), tuple(a.decode() for a in argv if a)
            )
            if record is not None and record.alive():
                return record
    return None


class PodHandler:
    """One node's virt-handler pod, with the handles host mode's VirtHandler offers tests:
    `node`, `log` (same file), `record()` (its host process) and `ensure()` (ready again)."""

    def __init__(self, ctx: ClusterContext, node: NodeSpec) -> None:
        self.ctx = ctx
        self.node = node
        self.name = f"virt-handler-{node.name}"
        self.kubectl = Kubectl(ctx.layout.admin_kubeconfig)

    @property
    def log(self) -> Path:
        return self.ctx.layout.log(self.name)

    def record(self) -> ProcessRecord | None:
        return _handler_process(self.node.kubelet_root)

    def metrics_url(self) -> str:
        """The handler pod's /metrics (pod IPs are reachable from the host)."""
        pod = self._pod()
        ip = ((pod or {}).get("status") or {}).get("podIP")
        if not ip:
            raise ComponentError(f"{self.name}: no handler pod with an IP on {self.node.name}")
        return f"http://{ip}:{HANDLER_METRICS_PORT}/metrics"

    def _pod(self) -> dict[str, Any] | None:
        found = self.kubectl.run(
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-l",
            "kubevirt.io=virt-handler",
            "--field-selector",
            f"spec.nodeName={self.node.name}",
            "-o",
            "json",
            check=False,
        )
        if found.returncode != 0:
            return None
        pods: list[dict[str, Any]] = [
            p
            for p in json.loads(found.stdout).get("items", [])
            if not p["metadata"].get("deletionTimestamp")
        ]
        return pods[0] if pods else None

    def _ready(self) -> bool:
        pod = self._pod()
        for cond in ((pod or {}).get("status") or {}).get("conditions", []):
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                return True
        return False

    def _serving(self) -> bool:
        """The handler answers its own /readyz (the pod's Ready may still be the old one's)."""
        ip = (((self._pod() or {}).get("status")) or {}).get("podIP")
        if not ip:
            return False
        conn = http.client.HTTPConnection(ip, HANDLER_METRICS_PORT, timeout=3)
        try:
            conn.request("GET", "/readyz")
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def _backing_off(self) -> str | None:
        """The pod's name while the kubelet holds its container in CrashLoopBackOff."""
        pod = self._pod() or {}
        for status in (pod.get("status") or {}).get("containerStatuses", []):
            waiting = (status.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") == "CrashLoopBackOff":
                return str(pod["metadata"]["name"])
        return None

    def status(self) -> ComponentStatus:
        """Its host process and whether it serves /readyz (like a host-mode component)."""
        record = self.record()
        ok = record is not None and self._serving()
        detail = "serving /readyz" if ok else "not running or not ready"
        return ComponentStatus(self.name, record.pid if record else None, ok, Health(ok, detail))

    def ensure(self, timeout: float = 180.0) -> str:
        """Wait until the kubelet has the handler running, serving and Ready again.

        A container killed again and again waits out the kubelet's growing back-off (up to
        5 min); its pod is then deleted so the DaemonSet starts a new one at once.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.record() is not None and self._serving() and self._ready():
                return "running"
            stuck = self._backing_off()
            if stuck is not None:
                self.kubectl.run(
                    "delete", "pod", stuck, "-n", NAMESPACE, "--wait=false", check=False
                )
            time.sleep(0.5)
        raise ComponentError(f"{self.name}: the handler pod is not Ready after {timeout:.0f}s")
