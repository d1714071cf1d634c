"""virtctl credentials add-ssh-key / remove-ssh-key / set-password against a fake API
server holding a VM and its Secrets (upstream's pkg/virtctl/credentials cases)."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from virtctl.cli import main

if TYPE_CHECKING:
    from conftest import Routes

CORE = "/api/v1/namespaces/team-a"
VMS = "/apis/kubevirt.io/v1/namespaces/team-a/virtualmachines"
VMIS = "/apis/kubevirt.io/v1/namespaces/team-a/virtualmachineinstances"
OLD = "ssh-ed25519 AAAAold old@host"
NEW = "ssh-ed25519 AAAAnew new@host"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _text(value: str) -> str:
    return base64.b64decode(value).decode()


def _agent_ssh(secret: str, *users: str) -> dict[str, Any]:
    return {
        "sshPublicKey": {
            "source": {"secret": {"secretName": secret}},
            "propagationMethod": {"qemuGuestAgent": {"users": list(users)}},
        }
    }


class Cluster:
    """Objects by path; GET, POST (generateName), merge PATCH of Secrets (with the
    resourceVersion guard) and JSON PATCH appends to the VM."""

    def __init__(self, credentials: list[dict[str, Any]] | None = None) -> None:
        template_spec: dict[str, Any] = {"domain": {"devices": {}}}
        if credentials is not None:
            template_spec["accessCredentials"] = credentials
        vm = {"metadata": {"name": "vm1", "namespace": "team-a", "uid": "u-1"},
              "spec": {"template": {"spec": template_spec}}}  # fmt: skip
        self.objects: dict[str, dict[str, Any]] = {f"{VMS}/vm1": vm}
        self.version = 1

    def secret(self, name: str, data: dict[str, str], *, owned: bool = True) -> None:
        meta: dict[str, Any] = {"name": name, "resourceVersion": str(self.version)}
        if owned:
            meta["ownerReferences"] = [{"kind": "VirtualMachine", "name": "vm1", "uid": "u-1"}]
        self.objects[f"{CORE}/secrets/{name}"] = {
            "metadata": meta,
            "data": {k: _b64(v) for k, v in data.items()},
        }

    def data(self, name: str) -> dict[str, str]:
        return {k: _text(v) for k, v in self.objects[f"{CORE}/secrets/{name}"]["data"].items()}

    def vm_credentials(self) -> list[dict[str, Any]]:
        spec = self.objects[f"{VMS}/vm1"]["spec"]["template"]["spec"]
        return list(spec.get("accessCredentials") or [])

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "GET":
            found = self.objects.get(path)
            return (200, found) if found else (404, {"kind": "Status", "code": 404,
                                                     "reason": "NotFound", "message": "not found"})  # fmt: skip
        if method == "POST":
            obj = copy.deepcopy(body)
            obj["metadata"]["name"] = obj["metadata"].pop("generateName") + "abcde"
            self.objects[f"{path}/{obj['metadata']['name']}"] = obj
            return 201, obj
        target = self.objects[path]
        self.version += 1
        if isinstance(body, list):  # JSON patch of the VM
            spec = target["spec"]["template"]["spec"]
            for op in body:
                if op["op"] == "test" and spec.get("accessCredentials") is not None:
                    return 422, {"kind": "Status", "code": 422, "message": "test failed"}
                if op["op"] == "add" and op["path"].endswith("/-"):
                    if "accessCredentials" not in spec:
                        return 422, {"kind": "Status", "code": 422, "message": "no such path"}
                    spec["accessCredentials"].append(op["value"])
                elif op["op"] == "add":
                    spec["accessCredentials"] = op["value"]
            return 200, target
        guard = (body.get("metadata") or {}).get("resourceVersion")
        if guard and guard != target["metadata"]["resourceVersion"]:
            return 409, {"kind": "Status", "code": 409, "reason": "Conflict", "message": "c"}
        data = target.setdefault("data", {})
        for key, value in body["data"].items():
            if value is None:
                data.pop(key, None)
            else:
                data[key] = value
        target["metadata"]["resourceVersion"] = str(self.version)
        return 200, target


def _virtctl(api: Routes, cluster: Cluster, tmp_path: Path, *argv: str) -> int:
    api.handle = cluster.handle
    return main(["credentials", *argv, "vm1", "--kubeconfig", api.kubeconfig(tmp_path)])


def test_add_ssh_key_goes_into_the_users_secret(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Cluster([_agent_ssh("keys", "root")])
    cluster.secret("keys", {"k1": OLD})
    assert _virtctl(api, cluster, tmp_path, "add-ssh-key", "-u", "root", "--value", NEW) == 0
    assert sorted(cluster.data("keys").values()) == [NEW, OLD]
    assert 'Successfully added the key to secret "keys"' in capsys.readouterr().out
    # The same key again: the Secret already holds it.
    assert _virtctl(api, cluster, tmp_path, "add-ssh-key", "-u", "root", "--value", NEW) == 0
    assert len(cluster.data("keys")) == 2
    assert 'Secret "keys" already contains this SSH key.' in capsys.readouterr().out


def test_a_secret_the_vm_does_not_own_needs_force(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Cluster([_agent_ssh("keys", "root")])
    cluster.secret("keys", {"k1": OLD}, owned=False)
    key = tmp_path / "id.pub"
    key.write_text(NEW + "\n")
    assert _virtctl(api, cluster, tmp_path, "add-ssh-key", "-u", "root", "-f", str(key)) == 1
    assert (
        "secret keys does not have an owner reference pointing to VM vm1" in capsys.readouterr().err
    )
    argv = ("add-ssh-key", "-u", "root", "-f", str(key), "--force")
    assert _virtctl(api, cluster, tmp_path, *argv) == 0
    assert NEW in cluster.data("keys").values()


def test_a_user_without_a_secret_gets_a_new_owned_one_on_a_stopped_vm(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Cluster()
    assert _virtctl(api, cluster, tmp_path, "add-ssh-key", "-u", "fedora", "--value", NEW) == 0
    name = "vm1-ssh-key-abcde"
    secret = cluster.objects[f"{CORE}/secrets/{name}"]
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert list(cluster.data(name).values()) == [NEW]
    assert cluster.vm_credentials() == [_agent_ssh(name, "fedora")]
    # A running VM is refused without --force (the new Secret takes effect at restart).
    cluster.objects[f"{VMIS}/vm1"] = {"metadata": {"name": "vm1"}}
    argv = ("add-ssh-key", "-u", "admin", "--value", NEW, "--create-secret")
    assert _virtctl(api, cluster, tmp_path, *argv) == 1
    assert "virtual machine vm1 is running. Use --force flag" in capsys.readouterr().err


def test_several_secrets_need_secret_and_a_key_is_needed(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Cluster([_agent_ssh("a", "root"), _agent_ssh("b", "root")])
    assert _virtctl(api, cluster, tmp_path, "add-ssh-key", "-u", "root", "--value", NEW) == 1
    assert "multiple secrets specified, use option --secret" in capsys.readouterr().err
    argv = ("add-ssh-key", "-u", "root", "--value", NEW, "--secret", "c")
    assert _virtctl(api, cluster, tmp_path, *argv) == 1
    assert "secret c was not assigned" in capsys.readouterr().err
    assert _virtctl(api, cluster, tmp_path, "add-ssh-key", "-u", "root") == 1
    assert "one of --file, or --value must be specified" in capsys.readouterr().err


def test_remove_ssh_key_takes_its_lines_out_of_every_secret_of_the_user(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = Cluster([_agent_ssh("a", "root"), _agent_ssh("b", "root", "admin")])
    cluster.secret("a", {"k1": f"{OLD}\n\n{NEW}\n", "k2": NEW})
    cluster.secret("b", {"k1": OLD})
    assert _virtctl(api, cluster, tmp_path, "remove-ssh-key", "-u", "root", "--value", NEW) == 0
    assert cluster.data("a") == {"k1": OLD}
    assert cluster.data("b") == {"k1": OLD}
    assert _virtctl(api, cluster, tmp_path, "remove-ssh-key", "-u", "nobody", "--value", NEW) == 0
    assert "No secrets associated with user nobody" in capsys.readouterr().out


def test_set_password_writes_the_users_key_of_the_password_secret(
    api: Routes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _virtctl(api, Cluster(), tmp_path, "set-password", "-u", "root", "-p", "x") == 1
    assert "no secrets assigned to UserPassword AccessCredentials" in capsys.readouterr().err
    password = {
        "userPassword": {
            "source": {"secret": {"secretName": "pw"}},
            "propagationMethod": {"qemuGuestAgent": {}},
        }
    }
    cluster = Cluster([password])
    cluster.secret("pw", {"admin": "old"})
    assert _virtctl(api, cluster, tmp_path, "set-password", "-u", "root", "-p", "s3cret") == 0
    assert cluster.data("pw") == {"admin": "old", "root": "s3cret"}
    assert 'Successfully set password in secret "pw"' in capsys.readouterr().out
