"""The rules of `virtctl credentials` (upstream's pkg/virtctl/credentials/common), pure.

Which Secrets of a VM's ``spec.template.spec.accessCredentials`` a command edits, whether
the VM owns a Secret, and how keys are added to and taken out of a Secret's data. A Secret
holds SSH keys one per line in any of its keys (the launcher reads them all); a password
Secret holds one key per user.
"""

from __future__ import annotations

import base64
import secrets
import string
from collections.abc import Mapping, Sequence
from typing import Any

from kubevirt_api.values import as_list, as_map, as_str

__all__ = [
    "CredentialsError",
    "access_credential_for",
    "contains_key",
    "new_key_name",
    "owned_by_vm",
    "password_secrets",
    "pick_secret",
    "secret_with_key",
    "ssh_secrets_for_user",
    "without_key",
]

_SUFFIX = string.ascii_lowercase + string.digits


class CredentialsError(ValueError):
    """A refusal in upstream's words."""


def _credentials(vm: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    template = as_map(as_map(vm.get("spec")).get("template"))
    return [as_map(c) for c in as_list(as_map(template.get("spec")).get("accessCredentials"))]


def _secret_name(body: Mapping[str, Any]) -> str:
    return as_str(as_map(as_map(body.get("source")).get("secret")).get("secretName")) or ""


def ssh_secrets_for_user(vm: Mapping[str, Any], user: str) -> list[str]:
    """Secrets of the VM's agent-propagated SSH key credentials that list `user`."""
    found = []
    for credential in _credentials(vm):
        ssh = as_map(credential.get("sshPublicKey"))
        agent = as_map(ssh.get("propagationMethod")).get("qemuGuestAgent")
        name = _secret_name(ssh)
        if name and isinstance(agent, Mapping) and user in as_list(agent.get("users")):
            found.append(name)
    return found


def password_secrets(vm: Mapping[str, Any]) -> list[str]:
    """Secrets of the VM's agent-propagated userPassword credentials."""
    found = []
    for credential in _credentials(vm):
        password = as_map(credential.get("userPassword"))
        agent = as_map(password.get("propagationMethod")).get("qemuGuestAgent")
        name = _secret_name(password)
        if name and isinstance(agent, Mapping):
            found.append(name)
    return found


def pick_secret(wanted: str, assigned: Sequence[str]) -> str:
    """`wanted` if the VM assigns it, else the only assigned one (upstream's
    FindSecretOrGetFirst)."""
    if not wanted:
        if len(assigned) > 1:
            raise CredentialsError(
                "multiple secrets specified, use option --secret to specify which secret to modify"
            )
        return assigned[0]
    if wanted in assigned:
        return wanted
    raise CredentialsError(f"secret {wanted} was not assigned")


def owned_by_vm(obj: Mapping[str, Any], vm: Mapping[str, Any]) -> bool:
    """Whether `obj` has an owner reference to the VM (kind, name and uid)."""
    meta = as_map(vm.get("metadata"))
    for ref in as_list(as_map(obj.get("metadata")).get("ownerReferences")):
        ref = as_map(ref)
        if (
            ref.get("kind") == "VirtualMachine"
            and ref.get("name") == meta.get("name")
            and ref.get("uid") == meta.get("uid")
        ):
            return True
    return False


def new_key_name() -> str:
    """A fresh data key for an SSH key (upstream's ``ssh-key-`` and 6 random characters)."""
    return "ssh-key-" + "".join(secrets.choice(_SUFFIX) for _ in range(6))


def _decoded(data: object) -> dict[str, str]:
    return {
        str(k): base64.b64decode(str(v)).decode(errors="replace")
        for k, v in as_map(data).items()
        if v is not None
    }


def _line_has_key(line: str, key: str) -> bool:
    return line.strip().startswith(key)


def contains_key(secret: Mapping[str, Any], key: str) -> bool:
    """Whether a line of any of the Secret's values starts with `key`."""
    return any(
        _line_has_key(line, key)
        for value in _decoded(secret.get("data")).values()
        for line in value.split("\n")
    )


def without_key(secret: Mapping[str, Any], key: str) -> dict[str, str | None]:
    """The Secret's data changes (base64 values; None deletes) that take `key` out:
    its lines and blank lines go, a value left empty goes with them."""
    changes: dict[str, str | None] = {}
    for name, value in _decoded(secret.get("data")).items():
        kept = [line for line in value.split("\n") if line.strip() and not _line_has_key(line, key)]
        text = "\n".join(kept)
        if text == value:
            continue
        changes[name] = base64.b64encode(text.encode()).decode() if text else None
    return changes


def secret_with_key(vm: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A new Secret for `key`, named after the VM and owned by it (upstream's)."""
    meta = as_map(vm.get("metadata"))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "generateName": f"{meta.get('name')}-ssh-key-",
            "namespace": meta.get("namespace"),
            "ownerReferences": [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachine",
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                    "controller": True,
                }
            ],
        },
        "data": {new_key_name(): base64.b64encode(key.encode()).decode()},
    }


def access_credential_for(secret: str, user: str) -> dict[str, Any]:
    """An SSH key credential from `secret` for `user`, propagated by the guest agent."""
    return {
        "sshPublicKey": {
            "source": {"secret": {"secretName": secret}},
            "propagationMethod": {"qemuGuestAgent": {"users": [user]}},
        }
    }
