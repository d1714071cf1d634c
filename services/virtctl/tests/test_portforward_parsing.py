"""port-forward, ssh and scp arguments in every upstream form; expose's Service body."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import pytest
from virtctl.exposing import ExposeError, ServiceOptions, service_for
from virtctl.sshing import SshOptions, scp_argv, scp_host, ssh_argv
from virtctl.targets import (
    ForwardedPort,
    RemotePath,
    Target,
    TargetError,
    parse_port,
    parse_scp_location,
    parse_ssh_target,
    parse_target,
)


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("vmi/testvmi", Target("vmi", "testvmi")),
        ("vm/testvm/mynamespace", Target("vm", "testvm", "mynamespace")),
        ("VMIs/a", Target("vmi", "a")),
        ("virtualmachine/a", Target("vm", "a")),
        ("virtualmachineinstances/a/b", Target("vmi", "a", "b")),
    ],
)
def test_targets(text: str, target: Target) -> None:
    assert parse_target(text) == target


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("testvmi", "type and name"),
        ("pod/x", "unsupported resource type"),
        ("vmi/", "name cannot be empty"),
        ("vmi/x/", "namespace cannot be empty"),
        ("vmi/a/b/c", "more than two"),
    ],
)
def test_bad_targets(text: str, why: str) -> None:
    with pytest.raises(TargetError, match=why):
        parse_target(text)


@pytest.mark.parametrize(
    ("text", "port"),
    [
        ("8080", ForwardedPort(8080, 8080)),
        ("8080:22", ForwardedPort(8080, 22)),
        ("udp/8080:9090", ForwardedPort(8080, 9090, "udp")),
        ("TCP/22", ForwardedPort(22, 22)),
        (":22", ForwardedPort(0, 22)),
        ("0:22", ForwardedPort(0, 22)),
    ],
)
def test_ports(text: str, port: ForwardedPort) -> None:
    assert parse_port(text) == port


@pytest.mark.parametrize("text", ["", "0", "x", "70000", "22:0", "22:x", "sctp/22"])
def test_bad_ports(text: str) -> None:
    with pytest.raises(TargetError):
        parse_port(text)


def test_ssh_and_scp_targets() -> None:
    assert parse_ssh_target("fedora@vmi/vm1") == Target("vmi", "vm1", None, "fedora")
    assert parse_ssh_target("vm/vm1/ns") == Target("vm", "vm1", "ns")
    with pytest.raises(TargetError, match="user"):
        parse_ssh_target("@vmi/vm1")
    assert parse_scp_location("root@vmi/vm1/ns:/etc/hostname") == RemotePath(
        Target("vmi", "vm1", "ns", "root"), "/etc/hostname"
    )
    assert parse_scp_location("vm/vm1:") == RemotePath(Target("vm", "vm1"), "")
    for local in ("./notes.txt", "/tmp/a:b", "dir/file:x", "plain"):
        assert parse_scp_location(local) is None


def _proxy(argv: list[str]) -> list[str]:
    """The ProxyCommand as the shell will split it (after ssh turns %% back into %)."""
    option = next(a for a in argv if a.startswith("ProxyCommand="))
    return shlex.split(option.removeprefix("ProxyCommand=").replace("%%", "%"))


def test_ssh_argv_tunnels_through_port_forward_stdio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/opt/my tools/virtctl"])
    options = SshOptions(
        port=2222,
        username="jdoe",
        identity_file="/keys/id_ed25519",
        known_hosts="/tmp/kh",
        local_options=("-o", "StrictHostKeyChecking=no"),
        cluster_flags=("--kubeconfig", "/home/j/100% kube.yaml", "--context", "c1"),
    )
    argv = ssh_argv(Target("vmi", "vm1", None, "fedora"), "ns1", options, ["uname -a"])
    assert argv[0] == "ssh"
    assert argv[1] == "-o"
    assert "%%" in argv[2]  # ssh expands %-tokens in ProxyCommand
    assert _proxy(argv) == [
        "/opt/my tools/virtctl",
        "port-forward",
        "--stdio=true",
        "vmi/vm1/ns1",
        "2222",
        "--kubeconfig",
        "/home/j/100% kube.yaml",
        "--context",
        "c1",
    ]
    assert argv[3:] == [
        "-o",
        "StrictHostKeyChecking=no",
        "-i",
        "/keys/id_ed25519",
        "-o",
        "UserKnownHostsFile=/tmp/kh",
        "fedora@vmi.vm1.ns1",  # user@ in the target wins over -l
        "uname -a",
    ]


def test_ssh_argv_minimal_and_python_dash_m(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/src/virtctl/__main__.py"])
    argv = ssh_argv(Target("vm", "vm1"), "default", SshOptions())
    assert argv[3:] == ["vm.vm1.default"]
    assert _proxy(argv)[:3] == [sys.executable, "-m", "virtctl"]


def test_scp_argv_in_and_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["virtctl"])
    options = SshOptions(username="root")
    target = Target("vmi", "vm1")
    guest = scp_host(target, "ns1", options, "/root/f.txt")
    assert guest == "root@vmi.vm1.ns1:/root/f.txt"
    copy_in = scp_argv(target, "ns1", options, "local.txt", guest, recursive=True)
    assert copy_in[0] == "scp"
    assert _proxy(copy_in) == ["virtctl", "port-forward", "--stdio=true", "vmi/vm1/ns1", "22"]
    assert copy_in[3:] == ["-r", "local.txt", "root@vmi.vm1.ns1:/root/f.txt"]
    copy_out = scp_argv(target, "ns1", options, guest, ".", preserve=True)
    assert copy_out[3:] == ["-p", "root@vmi.vm1.ns1:/root/f.txt", "."]


def _vmi(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "vmi1",
            "namespace": "ns1",
            "labels": {"app": "web", "kubevirt.io/nodeName": "node1"},
        },
        "spec": spec,
    }


def test_expose_vmi_selects_its_labels_without_the_node() -> None:
    service = service_for(
        "vmi", _vmi(), ServiceOptions("web", port=80, target_port="8080", service_type="NodePort")
    )
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "ns1"},
        "spec": {
            "ports": [{"protocol": "TCP", "port": 80, "targetPort": 8080}],
            "selector": {"app": "web"},
            "type": "NodePort",
        },
    }


def test_expose_vm_uses_template_labels_and_declared_ports() -> None:
    vm = {
        "metadata": {"name": "vm1", "labels": {"ignored": "yes"}},
        "spec": {
            "template": {
                "metadata": {"labels": {"kubevirt.io/vm": "vm1"}},
                "spec": {
                    "networks": [{"name": "default", "pod": {}}],
                    "domain": {
                        "devices": {
                            "interfaces": [
                                {
                                    "name": "default",
                                    "masquerade": {},
                                    "ports": [{"port": 22}, {"port": 53, "protocol": "udp"}],
                                }
                            ]
                        }
                    },
                },
            }
        },
    }
    spec = service_for("vm", vm, ServiceOptions("svc"))["spec"]
    assert spec["selector"] == {"kubevirt.io/vm": "vm1"}
    assert spec["ports"] == [
        {"name": "port-1", "protocol": "TCP", "port": 22},
        {"name": "port-2", "protocol": "UDP", "port": 53},
    ]
    assert spec["type"] == "ClusterIP"


def test_expose_vmirs_uses_match_labels_and_refuses_expressions() -> None:
    rs = {"metadata": {"name": "rs"}, "spec": {"selector": {"matchLabels": {"app": "x"}}}}
    options = ServiceOptions("svc", port=22, protocol="UDP", port_name="ssh", cluster_ip="None")
    spec = service_for("vmirs", rs, options)["spec"]
    assert spec["selector"] == {"app": "x"}
    assert spec["ports"] == [{"protocol": "UDP", "port": 22, "name": "ssh"}]
    assert spec["clusterIP"] == "None"
    rs["spec"]["selector"]["matchExpressions"] = [{"key": "a", "operator": "Exists"}]
    with pytest.raises(ExposeError, match="match expressions"):
        service_for("vmirs", rs, ServiceOptions("svc", port=22))


@pytest.mark.parametrize(
    ("obj", "options", "why"),
    [
        ({"metadata": {"name": "bare"}}, ServiceOptions("s", port=22), "missing label"),
        (_vmi(), ServiceOptions("s"), "couldn't find port"),
        (_vmi(), ServiceOptions("s", port=22, protocol="SCTP"), "unknown protocol"),
        (_vmi(), ServiceOptions("s", port=22, service_type="ExternalName"), "not supported"),
        (_vmi(), ServiceOptions("s", port=22, service_type="Headless"), "unknown service type"),
    ],
)
def test_expose_refusals(obj: dict[str, Any], options: ServiceOptions, why: str) -> None:
    with pytest.raises(ExposeError, match=why):
        service_for("vmi", obj, options)
