"""`virtctl credentials add-ssh-key | remove-ssh-key | set-password`: edit the Secrets a
VM's agent-propagated access credentials name (upstream's pkg/virtctl/credentials).

The launcher follows its Secrets, so a running VM's guest gets the change without a
restart (docs/guest-agent.md). A Secret the VM does not own is edited only with
``--force``; ``add-ssh-key`` makes a new owned Secret (and a credential naming it) when
the user has none, or with ``--create-secret``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
from kube_runtime import (
    SECRETS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    ApiError,
    JsonPatchOp,
    Resource,
)

from virtctl.commands.subresource import (
    Cluster,
    SubresourceError,
    add_cluster_flags,
    cluster_from_args,
    open_cluster,
)
from virtctl.credentialing import (
    CredentialsError,
    access_credential_for,
    contains_key,
    new_key_name,
    owned_by_vm,
    password_secrets,
    pick_secret,
    secret_with_key,
    ssh_secrets_for_user,
    without_key,
)

__all__ = ["register", "run"]

_CREDENTIALS = "/spec/template/spec/accessCredentials"
_RETRIES = 5


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="VM", help="the VirtualMachine")
    parser.add_argument("-u", "--user", required=True, help="Name of the user.")
    parser.add_argument("--secret", default="", help="Name of the secret with SSH keys.")
    parser.add_argument(
        "--force",
        action="store_true",
        help="Force update of secret, even if it's not owned by the VM.",
    )
    add_cluster_flags(parser)


def _ssh_key_flags(parser: argparse.ArgumentParser) -> None:
    given = parser.add_mutually_exclusive_group()
    given.add_argument("-f", "--file", default="", help="Path to the SSH public key file.")
    given.add_argument("--value", default="", help="Literal value of the SSH public key.")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``credentials`` and its three subcommands to ``subparsers``."""
    parser = subparsers.add_parser(
        "credentials", help="Manipulate credentials on a virtual machine."
    )
    commands = parser.add_subparsers(dest="credentials_command", metavar="COMMAND")
    parser.set_defaults(run=lambda _args: _usage(parser))

    add = commands.add_parser(
        "add-ssh-key",
        help="Add credentials to a virtual machine.",
        epilog="examples:\n"
        "  virtctl credentials add-ssh-key --user <username> --file <path-to-ssh-public-key> <vm>\n"
        "  virtctl credentials add-ssh-key --user <username> --value <literal-key> <vm>\n"
        "  virtctl credentials add-ssh-key --create-secret --user <username> --file <key> <vm>",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(add)
    _ssh_key_flags(add)
    how = add.add_mutually_exclusive_group()
    how.add_argument(
        "--create-secret",
        action="store_true",
        help="Create a new secret for the SSH key. The new key will not be added to a running "
        "VM. Use --force to add a new secret even if the VM is running.",
    )
    how.add_argument(
        "--update-secret",
        action="store_true",
        help="Add the SSH key to an existing secret. Use --force option, if the secret does "
        "not have owner reference pointing to the VM.",
    )
    add.set_defaults(run=run, action=_add_ssh_key)

    remove = commands.add_parser(
        "remove-ssh-key",
        help="Remove credentials from a virtual machine.",
        epilog="examples:\n"
        "  virtctl credentials remove-ssh-key --user <username> --file <key> <vm>\n"
        "  virtctl credentials remove-ssh-key --user <username> --value <literal-key> <vm>",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(remove)
    _ssh_key_flags(remove)
    remove.set_defaults(run=run, action=_remove_ssh_key)

    password = commands.add_parser(
        "set-password",
        help="Set password for a user",
        epilog="example:\n"
        "  virtctl credentials set-password --user <username> --password <password> <vm>",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(password)
    password.add_argument("-p", "--password", required=True, help="Password for the user")
    password.set_defaults(run=run, action=_set_password)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 0


def _ssh_key(args: argparse.Namespace) -> str:
    if args.value:
        return str(args.value).strip()
    if not args.file:
        raise CredentialsError("error getting ssh key: one of --file, or --value must be specified")
    try:
        return Path(args.file).read_text().strip()
    except OSError as error:
        raise CredentialsError(f"error getting ssh key: {error}") from None


async def _get(cluster: Cluster, resource: Resource, name: str, what: str) -> Mapping[str, Any]:
    """The object, or CredentialsError starting with upstream's "error getting <what>"."""
    try:
        found: Mapping[str, Any] = await cluster.client.get(resource, name, cluster.namespace)
    except ApiError as error:
        raise CredentialsError(f"error getting {what}: {error.message}") from None
    return found


async def _vm(cluster: Cluster, name: str) -> Mapping[str, Any]:
    return await _get(cluster, VIRTUAL_MACHINES, name, "virtual machine")


async def _secret(cluster: Cluster, name: str) -> Mapping[str, Any]:
    return await _get(cluster, SECRETS, name, f'secret "{name}"')


def _check_owner(secret: Mapping[str, Any], vm: Mapping[str, Any], force: bool) -> None:
    if not force and not owned_by_vm(secret, vm):
        raise CredentialsError(
            f"secret {secret['metadata']['name']} does not have an owner reference pointing "
            f"to VM {vm['metadata']['name']}"
        )


async def _patch_secret_data(cluster: Cluster, name: str, data: Mapping[str, str | None]) -> None:
    try:
        await cluster.client.merge_patch(SECRETS, name, {"data": dict(data)}, cluster.namespace)
    except ApiError as error:
        raise CredentialsError(f'error patching secret "{name}": {error.message}') from None


async def _add_ssh_key(cluster: Cluster, args: argparse.Namespace) -> str:
    key = _ssh_key(args)
    vm = await _vm(cluster, args.name)
    assigned = ssh_secrets_for_user(vm, args.user)
    if args.create_secret or (not args.update_secret and not assigned):
        return await _add_secret_with_key(cluster, args, vm, key)
    if not assigned:
        raise CredentialsError(f"no secrets specified for user: {args.user}")
    name = pick_secret(args.secret, assigned)
    secret = await _secret(cluster, name)
    if contains_key(secret, key):
        return f'Secret "{name}" already contains this SSH key.'
    _check_owner(secret, vm, args.force)
    await _patch_secret_data(cluster, name, {new_key_name(): _b64(key)})
    return f'Successfully added the key to secret "{name}"'


async def _add_secret_with_key(
    cluster: Cluster, args: argparse.Namespace, vm: Mapping[str, Any], key: str
) -> str:
    if not args.force:
        try:
            await cluster.client.get(VIRTUAL_MACHINE_INSTANCES, args.name, cluster.namespace)
        except ApiError as error:
            if error.status != 404:
                raise CredentialsError(
                    f"error when getting virtual machine instance: {error.message}"
                ) from None
        else:
            raise CredentialsError(
                f"virtual machine {args.name} is running. Use --force flag to update a running "
                "VM, it will take effect after restart"
            )
    try:
        created = await cluster.client.create(SECRETS, secret_with_key(vm, key), cluster.namespace)
    except ApiError as error:
        raise CredentialsError(f"error creating secret: {error.message}") from None
    credential = access_credential_for(created["metadata"]["name"], args.user)
    append: list[JsonPatchOp] = [{"op": "add", "path": f"{_CREDENTIALS}/-", "value": credential}]
    try:
        await cluster.client.json_patch(VIRTUAL_MACHINES, args.name, append, cluster.namespace)
    except ApiError:
        # No accessCredentials list yet: make it, unless someone made one meanwhile (the
        # apiserver's test of null passes for a missing path).
        first: list[JsonPatchOp] = [
            {"op": "test", "path": _CREDENTIALS, "value": None},
            {"op": "add", "path": _CREDENTIALS, "value": [credential]},
        ]
        try:
            await cluster.client.json_patch(VIRTUAL_MACHINES, args.name, first, cluster.namespace)
        except ApiError as error:
            raise CredentialsError(f"error patching virtual machine: {error.message}") from None
    return f'Successfully added the key to secret "{created["metadata"]["name"]}"'


async def _remove_ssh_key(cluster: Cluster, args: argparse.Namespace) -> str:
    key = _ssh_key(args)
    vm = await _vm(cluster, args.name)
    assigned = ssh_secrets_for_user(vm, args.user)
    if not assigned:
        return f"No secrets associated with user {args.user}"
    if args.secret and args.secret not in assigned:
        raise CredentialsError(f"secret {args.secret} is not associated with user {args.user}")
    for name in [args.secret] if args.secret else assigned:
        for _ in range(_RETRIES):
            try:
                secret = await cluster.client.get(SECRETS, name, cluster.namespace)
            except ApiError as error:
                if error.status == 404:
                    break
                raise CredentialsError(f'error getting secret "{name}": {error.message}') from None
            _check_owner(secret, vm, args.force)
            changes = without_key(secret, key)
            if not changes:
                break
            # Guarded by the version read: a concurrent edit is read again (409).
            body = {"metadata": {"resourceVersion": secret["metadata"]["resourceVersion"]}}
            try:
                await cluster.client.merge_patch(
                    SECRETS, name, {**body, "data": changes}, cluster.namespace
                )
                break
            except ApiError as error:
                if error.status == 404:
                    break
                if error.status != 409:
                    raise CredentialsError(
                        f'error patching secret "{name}": {error.message}'
                    ) from None
        else:
            raise CredentialsError(f'secret "{name}" kept changing; try again')
    return ""


async def _set_password(cluster: Cluster, args: argparse.Namespace) -> str:
    vm = await _vm(cluster, args.name)
    assigned = password_secrets(vm)
    if not assigned:
        raise CredentialsError("no secrets assigned to UserPassword AccessCredentials")
    name = pick_secret(args.secret, assigned)
    if not args.force:
        _check_owner(await _secret(cluster, name), vm, force=False)
    await _patch_secret_data(cluster, name, {args.user: _b64(str(args.password))})
    return f'Successfully set password in secret "{name}"'


async def _run(args: argparse.Namespace) -> str:
    async with open_cluster(cluster_from_args(args)) as cluster:
        message: str = await args.action(cluster, args)
        return message


def run(args: argparse.Namespace) -> int:
    """Run the subcommand; exit 1 with upstream's reason on failure."""
    try:
        message = asyncio.run(_run(args))
    except (CredentialsError, SubresourceError) as error:
        print(f"virtctl: {error}", file=sys.stderr)
        return 1
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        print(f"virtctl: cannot reach the cluster: {error}", file=sys.stderr)
        return 1
    if message:
        print(message)
    return 0
