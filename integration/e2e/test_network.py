"""Guest networking on the pod network, seen from the guest, from other pods and from virtctl.

The tiny guest (tools/images, kv_images.guest) takes its address by DHCP and prints the
lease on its console (`KUBEVIRT-PY-GUEST-LEASE ...`, parsed by `GuestLease`), serves a page
naming its hostname on port 80 (busybox httpd) and runs dropbear on port 22 with the keys
of its cloud-init NoCloud disk. Commands typed into `virtctl console` run in its shell.

Upstream's behaviour (UPSTREAM-BEHAVIOUR.md section 1): masquerade gives the guest
10.0.2.2/24 with gateway 10.0.2.1 and the pod's DNS; the VMI reports the pod IP; inbound
traffic to the pod IP reaches the guest, only on the declared ports when `ports` is set;
bridge binding hands the guest the pod's own IP.

Each test makes its own VM in its own namespace; failures say what was expected, what
was seen and the tail of the guest's console.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kv_images.guest import GUEST_HTTP_PAGE, GUEST_SSH_KEYS_MARKER, GuestLease

CLIENT_IMAGE = "kubevirt-py/virt-launcher:devel"  # on the node for every e2e session; has python3


# --- the VM ------------------------------------------------------------------------------


def network_vm(
    kubevirt: Any,
    name: str,
    *,
    binding: str = "masquerade",
    ports: list[int] | None = None,
    ssh_secret: str | None = None,
    user_data_key: str | None = None,
) -> dict[str, Any]:
    """The kernel-boot guest with one pod-network interface (and a cloud-init disk for keys)."""
    vm = kubevirt.vm(name)
    spec = vm["spec"]["template"]["spec"]
    interface: dict[str, Any] = {"name": "default", binding: {}}
    if ports:
        interface["ports"] = [{"port": port} for port in ports]
    spec["domain"]["devices"]["interfaces"] = [interface]
    spec["networks"] = [{"name": "default", "pod": {}}]
    if ssh_secret or user_data_key:
        user_data = "#cloud-config\n"
        if user_data_key:
            user_data += f"ssh_authorized_keys:\n  - {user_data_key}\n"
        # virtio: the guest kernel has no AHCI driver for the default SATA bus.
        spec["domain"]["devices"]["disks"] = [{"name": "cloudinit", "disk": {"bus": "virtio"}}]
        spec["volumes"] = [{"name": "cloudinit", "cloudInitNoCloud": {"userData": user_data}}]
    if ssh_secret:
        spec["accessCredentials"] = [
            {
                "sshPublicKey": {
                    "source": {"secret": {"secretName": ssh_secret}},
                    "propagationMethod": {"noCloud": {}},
                }
            }
        ]
    return vm


def boot(kubevirt: Any, vm: dict[str, Any], namespace: str) -> tuple[dict[str, Any], str]:
    """Apply `vm`, wait until its VMI runs and its guest is ready: (VMI, console so far)."""
    name = vm["metadata"]["name"]
    kubevirt.apply(vm, namespace)
    kubevirt.wait_running(name, namespace)
    console = kubevirt.console_marker(name, namespace, timeout=120)
    vmi = kubevirt.wait_for(
        f"VMI {name} to report its interface's IP",
        lambda: _with_interface_ip(kubevirt.get("vmi", name, namespace)),
        60,
    )
    return vmi, console


def _with_interface_ip(vmi: dict[str, Any] | None) -> dict[str, Any] | None:
    interfaces = ((vmi or {}).get("status") or {}).get("interfaces") or []
    return vmi if interfaces and interfaces[0].get("ipAddress") else None


def tail(console: str, lines: int = 25) -> str:
    return "\n".join(console.splitlines()[-lines:])


def lease_of(console: str) -> GuestLease:
    lease = GuestLease.from_console(console)
    assert lease is not None, f"no lease line on the guest's console; its tail:\n{tail(console)}"
    return lease


def launcher_pod(kubevirt: Any, name: str, namespace: str) -> dict[str, Any]:
    pods = json.loads(
        kubevirt.kubectl.run(
            "get", "pods", "-n", namespace, "-l", "kubevirt.io=virt-launcher", "-o", "json"
        ).stdout
    )["items"]
    mine = [p for p in pods if p["metadata"].get("labels", {}).get("vm.kubevirt.io/name") == name]
    assert len(mine) == 1, f"expected one launcher pod for {name}, found {len(mine)}"
    return mine[0]


# --- a client pod in another namespace -----------------------------------------------------

_CLIENT = textwrap.dedent(
    """
    import socket, sys, urllib.request
    kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "get":
        with urllib.request.urlopen(f"http://{host}:{port}/", timeout=20) as r:
            print("BODY", r.read().decode().strip())
    else:
        try:
            socket.create_connection((host, port), timeout=10).close()
            print("CONNECTED")
        except ConnectionRefusedError:
            print("REFUSED")
        except OSError as e:
            print("ERROR", type(e).__name__, e)
    """
)


@pytest.fixture
def client(kubevirt: Any, namespace: str) -> Iterator[Callable[[str, str, int], str]]:
    """A pod in a namespace of its own that runs `_CLIENT` commands through kubectl exec."""
    other = f"{namespace}-client"[:63]
    kubevirt.kubectl.run("create", "namespace", other)
    kubevirt.kubectl.run("label", "namespace", other, "kubevirt-py.io/test=true")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "client"},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "client",
                    "image": CLIENT_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", "import time; time.sleep(3600)"],
                }
            ],
        },
    }
    kubevirt.apply(pod, other)
    kubevirt.wait_for(
        "the client pod Running",
        lambda: (
            ((kubevirt.get("pod", "client", other) or {}).get("status") or {}).get("phase")
            == "Running"
        ),
        120,
    )

    def run(kind: str, host: str, port: int) -> str:
        proc = kubevirt.kubectl.run(
            "exec", "-n", other, "client", "--", "python3", "-c", _CLIENT, kind, host, str(port),
            check=False,
        )  # fmt: skip
        return (proc.stdout + proc.stderr).strip()

    try:
        yield run
    finally:
        kubevirt.kubectl.run("delete", "namespace", other, "--wait=false", check=False)


# --- (a) the guest's lease, DNS and outbound traffic ---------------------------------------


def test_masquerade_guest_gets_its_lease_and_reaches_the_apiserver_service(
    kubevirt: Any, namespace: str
) -> None:
    vmi, console = boot(kubevirt, network_vm(kubevirt, "masq"), namespace)
    lease = lease_of(console)
    pod = launcher_pod(kubevirt, "masq", namespace)
    resolv = kubevirt.kubectl.run(
        "exec", "-n", namespace, pod["metadata"]["name"], "-c", "compute", "--",
        "cat", "/etc/resolv.conf",
    ).stdout  # fmt: skip
    pod_dns = re.findall(r"^nameserver\s+(\S+)", resolv, re.MULTILINE)
    pod_search = next(
        (line.split()[1:] for line in resolv.splitlines() if line.startswith("search")), []
    )
    seen = f"seen {lease}; console tail:\n{tail(console)}"
    assert lease.address == "10.0.2.2/24", f"expected 10.0.2.2/24, {seen}"
    assert lease.routers == ("10.0.2.1",), f"expected gateway 10.0.2.1, {seen}"
    assert list(lease.dns) == [d for d in pod_dns if ":" not in d], (
        f"expected the pod's IPv4 nameservers {pod_dns}, {seen}"
    )
    assert list(lease.search) == pod_search, f"expected the pod's search list {pod_search}, {seen}"
    assert lease.hostname == "masq", f"expected the VMI name as hostname, {seen}"
    assert lease.mtu is not None, f"expected the pod's eth0 MTU, {seen}"
    assert vmi["status"]["interfaces"][0]["ipAddress"] == pod["status"]["podIP"], (
        f"status.interfaces[0] {vmi['status']['interfaces'][0]} should hold the pod IP "
        f"{pod['status']['podIP']}"
    )

    # DNS through the pod's resolver, then TCP out through the masquerade to the Service.
    svc_domain = next((s for s in lease.search if s.startswith("svc.")), "svc.cluster.local")
    name = f"kubernetes.default.{svc_domain}"
    expected_ip = kubevirt.kubectl.run(
        "get", "service", "kubernetes", "-n", "default", "-o", "jsonpath={.spec.clusterIP}"
    ).stdout.strip()
    looked_up = kubevirt.in_guest("masq", namespace, f"nslookup {name}")
    assert expected_ip in looked_up, (
        f"nslookup {name} in the guest should answer {expected_ip}; it printed:\n{looked_up}"
    )
    # Plain HTTP to the apiserver's TLS port: its answer ("400 Bad Request", sent to HTTP
    # clients) proves the connection went out and back (busybox's nc here has no -z, and
    # its static wget crashes resolving users).
    reached = kubevirt.in_guest(
        "masq",
        namespace,
        f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 10 {expected_ip} 443",
    )
    assert "400 Bad Request" in reached, (
        f"the guest should reach {expected_ip}:443 (kubernetes.default) and get the "
        f"apiserver's answer to plain HTTP; it printed:\n{reached}"
    )


# --- (b) inbound: pod IP, Service, declared ports ------------------------------------------


def test_other_pods_reach_the_guest_page_on_the_pod_ip_and_through_a_service(
    kubevirt: Any, namespace: str, client: Callable[[str, str, int], str]
) -> None:
    vmi, console = boot(kubevirt, network_vm(kubevirt, "web", ports=[80]), namespace)
    ip = vmi["status"]["interfaces"][0]["ipAddress"]
    page = client("get", ip, 80)
    assert f"BODY {GUEST_HTTP_PAGE} web" in page, (
        f"GET http://{ip}/ from another namespace: expected the guest's page naming 'web', "
        f"got {page!r}; console tail:\n{tail(console)}"
    )
    # Only port 80 is declared: nothing is forwarded to the guest on another port.
    other_port = client("connect", ip, 81)
    assert other_port == "REFUSED", f"port 81 of the pod IP should be refused, got {other_port!r}"

    # Depends on `virtctl expose` (built by another helper; upstream's flags).
    exposed = kubevirt.virtctl("expose", "vmi", "web", "-n", namespace, "--port", "80",
                               "--name", "web-http")  # fmt: skip
    assert exposed.returncode == 0, f"virtctl expose failed: {exposed.stderr.strip()}"
    cluster_ip = kubevirt.wait_for(
        "the web-http Service's ClusterIP",
        lambda: ((kubevirt.get("service", "web-http", namespace) or {}).get("spec") or {}).get(
            "clusterIP"
        ),
        30,
    )
    through_service = kubevirt.wait_for(
        "the guest's page through the Service",
        lambda: r if GUEST_HTTP_PAGE in (r := client("get", cluster_ip, 80)) else None,
        60,
    )
    assert f"{GUEST_HTTP_PAGE} web" in through_service


# --- (c) virtctl ssh / scp -----------------------------------------------------------------


def _key_pair(tmp_path: Path, name: str) -> tuple[Path, str]:
    key = tmp_path / name
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True
    )
    return key, (tmp_path / f"{name}.pub").read_text().strip()


_NO_HOST_CHECK = ("-t", "-o StrictHostKeyChecking=no", "-t", "-o UserKnownHostsFile=/dev/null")


def test_virtctl_ssh_and_scp_with_access_credentials_and_user_data_keys(
    kubevirt: Any, namespace: str, tmp_path: Path
) -> None:
    """Depends on `virtctl ssh` and `virtctl scp` (built by another helper; upstream's flags)."""
    cred_key, cred_pub = _key_pair(tmp_path, "cred")
    user_key, user_pub = _key_pair(tmp_path, "userdata")
    kubevirt.kubectl.run(
        "create", "secret", "generic", "guest-key", "-n", namespace, f"--from-literal=key1={cred_pub}"
    )  # fmt: skip
    vm = network_vm(kubevirt, "sshy", ssh_secret="guest-key", user_data_key=user_pub)
    _, console = boot(kubevirt, vm, namespace)
    assert f"{GUEST_SSH_KEYS_MARKER} 2" in console, (
        f"the guest should install 2 keys from its NoCloud disk; console tail:\n{tail(console)}"
    )
    for key in (cred_key, user_key):
        proc = kubevirt.virtctl(
            "ssh", "-n", namespace, "-i", str(key), "-l", "root", *_NO_HOST_CHECK,
            "-c", "hostname", "vmi/sshy",
        )  # fmt: skip
        assert proc.returncode == 0, f"virtctl ssh with {key.name} failed: {proc.stderr.strip()}"
        assert proc.stdout.strip().splitlines()[-1] == "sshy", proc.stdout

    local = tmp_path / "payload.txt"
    local.write_text(f"kubevirt-py {secrets.token_hex(8)}\n")
    back = tmp_path / "back.txt"
    for src, dst in (
        (str(local), "vmi/sshy:/tmp/payload.txt"),
        ("vmi/sshy:/tmp/payload.txt", str(back)),
    ):
        proc = kubevirt.virtctl(
            "scp", "-n", namespace, "-i", str(cred_key), "-l", "root", *_NO_HOST_CHECK, src, dst
        )  # fmt: skip
        assert proc.returncode == 0, f"virtctl scp {src} {dst} failed: {proc.stderr.strip()}"
    assert back.read_text() == local.read_text()


# --- (d) bridge binding --------------------------------------------------------------------


def test_bridge_binding_guest_holds_the_pod_ip_and_answers_on_it(
    kubevirt: Any, namespace: str, client: Callable[[str, str, int], str]
) -> None:
    vmi, console = boot(kubevirt, network_vm(kubevirt, "bridged", binding="bridge"), namespace)
    pod = launcher_pod(kubevirt, "bridged", namespace)
    pod_ip = pod["status"]["podIP"]
    lease = lease_of(console)
    assert lease.ip == pod_ip, (
        f"with bridge binding the guest should get the pod IP {pod_ip}; seen {lease}; "
        f"console tail:\n{tail(console)}"
    )
    assert vmi["status"]["interfaces"][0]["ipAddress"] == pod_ip
    addresses = kubevirt.in_guest("bridged", namespace, "ip -4 addr show eth0")
    assert f"inet {pod_ip}/" in addresses, f"eth0 in the guest should hold {pod_ip}:\n{addresses}"
    page = client("get", pod_ip, 80)
    assert f"BODY {GUEST_HTTP_PAGE} bridged" in page, (
        f"GET http://{pod_ip}/ should reach the bridged guest, got {page!r}"
    )
    # The pod's IP now lives in the guest: moving it to another node would break it.
    now = kubevirt.get("vmi", "bridged", namespace) or {}
    conditions = {c["type"]: c for c in (now.get("status") or {}).get("conditions") or []}
    migratable = conditions.get("LiveMigratable") or {}
    assert (migratable.get("status"), migratable.get("reason")) == (
        "False",
        "InterfaceNotLiveMigratable",
    ), f"bridge binding on the pod network is not live-migratable; conditions: {conditions}"


# --- (e) Multus named but absent -----------------------------------------------------------


def test_a_multus_network_on_a_cluster_without_multus_is_named_not_left_hanging(
    kubevirt: Any, namespace: str
) -> None:
    """This cluster has no Multus (its Go module is refused here): the VMI must say so in a
    condition, and no launcher pod may hang in ContainerCreating waiting for a network."""
    vm = network_vm(kubevirt, "multi")
    spec = vm["spec"]["template"]["spec"]
    spec["domain"]["devices"]["interfaces"].append({"name": "blue", "bridge": {}})
    spec["networks"].append({"name": "blue", "multus": {"networkName": "blue-net"}})
    kubevirt.apply(vm, namespace)

    def refused() -> dict[str, Any] | None:
        vmi = kubevirt.get("vmi", "multi", namespace) or {}
        for condition in (vmi.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Synchronized" and condition.get("status") == "False":
                return dict(condition)
        return None

    condition = kubevirt.wait_for("the VMI to say why it cannot start", refused, 60)
    assert condition.get("reason") == "FailedCreate", condition
    assert "Multus" in condition.get("message", ""), condition
    assert "spec.networks[1].multus.networkName" in condition.get("message", ""), condition
    pods = kubevirt.kubectl.run(
        "get", "pods", "-n", namespace, "-l", "kubevirt.io=virt-launcher", "-o", "name"
    ).stdout.split()
    assert pods == [], f"no launcher pod should be created without the network; found {pods}"
