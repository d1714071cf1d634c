"""`virtctl create vm|instancetype|preference`: print a manifest (YAML) built from flags.

Offline, as upstream: nothing is sent to a cluster; pipe the output to `kubectl create
-f -`. An explicit namespace (`-n`) goes into the metadata and makes an instancetype or
preference namespaced. A bad flag value exits 1 with one line naming the flag and what is
valid; flags that cannot be combined exit 2 (a usage error).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import yaml

from virtctl.commands.subresource import add_cluster_flags
from virtctl.creating import FlagError
from virtctl.creating.instancetypes import (
    InstancetypeOptions,
    PreferenceOptions,
    build_instancetype,
    build_preference,
)
from virtctl.creating.vm import CDI_VOLUME_FLAGS, VmOptions, build_vm

__all__ = ["dump_manifest", "register"]

_VOLUME_HELP = "Supported parameters: name:string,src:string,bootorder:uint"


def _go_bool(text: str) -> bool:
    """A cobra boolean's value: `--flag` alone is true, `--flag=false` is false."""
    lowered = text.lower()
    if lowered in ("true", "t", "1"):
        return True
    if lowered in ("false", "f", "0"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r} (use true or false)")


def _bool_flag(parser: argparse.ArgumentParser | Any, flag: str, help_text: str) -> None:
    parser.add_argument(
        flag,
        nargs="?",
        const=True,
        default=None,
        type=_go_bool,
        metavar="true|false",
        help=help_text,
    )


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (cloud-init user data) as literal blocks, as kubectl prints them."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_manifest(obj: dict[str, Any]) -> str:
    """YAML with sorted keys, as upstream's virtctl prints (sigs.k8s.io/yaml)."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=True, default_flow_style=False)


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``create`` and its kinds to ``subparsers``."""
    parser = subparsers.add_parser(
        "create",
        help="print a VirtualMachine, instancetype or preference manifest",
        description="Create a manifest for a VirtualMachine, instancetype or preference.",
    )
    kinds = parser.add_subparsers(dest="create_kind", metavar="KIND", required=True)
    _register_vm(kinds)
    _register_instancetype(kinds)
    _register_preference(kinds)


def _register_vm(kinds: argparse._SubParsersAction[Any]) -> None:
    vm = kinds.add_parser(
        "vm",
        help="a VirtualMachine manifest",
        description=(
            "Create a VirtualMachine manifest. If no boot order was specified volumes have "
            "the following fixed boot order: Containerdisk > PVC. Volumes that need CDI "
            "(--volume-import and its aliases) are refused: kubevirt-py has no CDI."
        ),
    )
    vm.add_argument("--name", help="the name of the VM (default: vm-<5 random characters>)")
    vm.add_argument("--run-strategy", help="the RunStrategy of the VM (default: Always)")
    vm.add_argument(
        "--termination-grace-period",
        type=int,
        default=180,
        metavar="SECONDS",
        help="the termination grace period of the VM (default: 180)",
    )
    sizing = vm.add_mutually_exclusive_group()
    sizing.add_argument("--memory", help="the guest memory of the VM (default: 512Mi)")
    sizing.add_argument(
        "--instancetype",
        metavar="[KIND/]NAME",
        help="the instancetype (kind virtualmachineinstancetype for a namespaced one; "
        "default: the cluster-wide kind)",
    )
    _bool_flag(
        sizing,
        "--infer-instancetype",
        "infer the instancetype from the first boot volume (default: true, best effort)",
    )
    sizing.add_argument(
        "--infer-instancetype-from", metavar="VOLUME", help="the volume to infer it from"
    )
    preference = vm.add_mutually_exclusive_group()
    preference.add_argument(
        "--preference",
        metavar="[KIND/]NAME",
        help="the preference (kind virtualmachinepreference for a namespaced one)",
    )
    _bool_flag(
        preference,
        "--infer-preference",
        "infer the preference from the first boot volume (default: true, best effort)",
    )
    preference.add_argument(
        "--infer-preference-from", metavar="VOLUME", help="the volume to infer it from"
    )
    vm.add_argument(
        "--volume-containerdisk",
        action="append",
        default=[],
        metavar="PARAMS",
        help=f"a containerdisk volume (repeatable). {_VOLUME_HELP}",
    )
    vm.add_argument(
        "--volume-pvc",
        action="append",
        default=[],
        metavar="PARAMS",
        help=f"a PVC used directly (repeatable). {_VOLUME_HELP}",
    )
    vm.add_argument(
        "--volume-sysprep",
        metavar="PARAMS",
        help="a ConfigMap or Secret as sysprep volume. Supported parameters: "
        "src:string,type:string (configmap or secret)",
    )
    for flag in CDI_VOLUME_FLAGS:
        vm.add_argument(
            f"--{flag}",
            action="append",
            default=[],
            metavar="PARAMS",
            help="refused: a DataVolume needs CDI, which kubevirt-py does not have",
        )
    vm.add_argument("--user", help="the user in the generated cloud-init user data")
    vm.add_argument(
        "--password-file",
        metavar="FILE",
        help="a file holding the password for the cloud-init user data (stored in clear)",
    )
    vm.add_argument(
        "--ssh-key",
        action="append",
        metavar="KEY[,KEY]",
        help="SSH authorized keys for the cloud-init user data (repeatable)",
    )
    _bool_flag(vm, "--ga-manage-ssh", "let the guest agent manage SSH keys (SELinux boolean)")
    vm.add_argument(
        "--access-cred",
        action="append",
        default=[],
        metavar="PARAMS",
        help="an access credential (repeatable). Supported parameters: "
        "type:string,src:string,method:string,user:string",
    )
    vm.add_argument(
        "--cloud-init",
        metavar="TYPE",
        help="the generated cloud-init data source: nocloud (default), configdrive, none",
    )
    vm.add_argument("--cloud-init-user-data", metavar="BASE64", help="base64 user data")
    vm.add_argument("--cloud-init-network-data", metavar="BASE64", help="base64 network data")
    add_cluster_flags(vm)
    vm.set_defaults(run=_run_vm)


def _register_instancetype(kinds: argparse._SubParsersAction[Any]) -> None:
    parser = _kind_parser(kinds, "instancetype", "Instancetype")
    parser.add_argument("--cpu", type=int, required=True, help="the number of guest vCPUs")
    parser.add_argument("--memory", required=True, help="the guest memory, e.g. 2Gi")
    parser.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="name:NAME,devicename:DEVICE",
        help="a vGPU to pass through (repeatable)",
    )
    parser.add_argument(
        "--hostdevice",
        action="append",
        default=[],
        metavar="name:NAME,devicename:DEVICE",
        help="a host device to pass through (repeatable)",
    )
    parser.add_argument("--iothreadspolicy", help="auto or shared")
    add_cluster_flags(parser)
    parser.set_defaults(run=_run_instancetype)


def _register_preference(kinds: argparse._SubParsersAction[Any]) -> None:
    parser = _kind_parser(kinds, "preference", "Preference")
    parser.add_argument(
        "--cpu-topology", help="the preferred CPU topology: sockets, cores, threads, spread, any"
    )
    parser.add_argument("--volume-storage-class", help="the preferred storage class")
    parser.add_argument("--machine-type", help="the preferred machine type")
    add_cluster_flags(parser)
    parser.set_defaults(run=_run_preference)


def _kind_parser(
    kinds: argparse._SubParsersAction[Any], command: str, kind: str
) -> argparse.ArgumentParser:
    """The parser of `create instancetype|preference`: the flags both kinds share."""
    namespaced, cluster = f"VirtualMachine{kind}", f"VirtualMachineCluster{kind}"
    parser: argparse.ArgumentParser = kinds.add_parser(
        command,
        help=f"a {cluster} (or namespaced) manifest",
        description=f"Create a {namespaced} or {cluster} manifest.",
    )
    parser.add_argument("--name", help="the name (default: a random one)")
    _bool_flag(parser, "--namespaced", f"create a {namespaced} (default: a {cluster})")
    return parser


# Upstream: --cloud-init-user-data is the whole user data, so these cannot add to it.
_EXCLUSIVE_WITH_USER_DATA = (
    ("user", "user"),
    ("password_file", "password-file"),
    ("ssh_key", "ssh-key"),
    ("ga_manage_ssh", "ga-manage-ssh"),
)


def _run_vm(args: argparse.Namespace) -> int:
    if args.cloud_init_user_data is not None:
        for attribute, flag in _EXCLUSIVE_WITH_USER_DATA:
            if getattr(args, attribute) is not None:
                print(
                    f"virtctl create vm: --cloud-init-user-data and --{flag} cannot be used "
                    "together (the user data given replaces the generated one)",
                    file=sys.stderr,
                )
                return 2
    ssh_keys = (
        [key for value in args.ssh_key for key in value.split(",") if key]
        if args.ssh_key is not None
        else None
    )
    options = VmOptions(
        name=args.name,
        namespace=args.namespace,
        run_strategy=args.run_strategy,
        termination_grace_period=args.termination_grace_period,
        memory=args.memory,
        instancetype=args.instancetype,
        infer_instancetype=args.infer_instancetype,
        infer_instancetype_from=args.infer_instancetype_from,
        preference=args.preference,
        infer_preference=args.infer_preference,
        infer_preference_from=args.infer_preference_from,
        containerdisks=args.volume_containerdisk,
        pvcs=args.volume_pvc,
        sysprep=args.volume_sysprep,
        user=args.user,
        password_file=args.password_file,
        ssh_keys=ssh_keys,
        ga_manage_ssh=args.ga_manage_ssh,
        access_creds=args.access_cred,
        cloud_init=args.cloud_init,
        cloud_init_user_data=args.cloud_init_user_data,
        cloud_init_network_data=args.cloud_init_network_data,
        cdi_volumes={flag: getattr(args, flag.replace("-", "_")) for flag in CDI_VOLUME_FLAGS},
    )
    return _print("vm", lambda: build_vm(options))


def _run_instancetype(args: argparse.Namespace) -> int:
    options = InstancetypeOptions(
        cpu=args.cpu,
        memory=args.memory,
        name=args.name,
        namespace=args.namespace,
        namespaced=bool(args.namespaced),
        gpus=args.gpu,
        host_devices=args.hostdevice,
        io_threads_policy=args.iothreadspolicy,
    )
    return _print("instancetype", lambda: (build_instancetype(options), []))


def _run_preference(args: argparse.Namespace) -> int:
    options = PreferenceOptions(
        name=args.name,
        namespace=args.namespace,
        namespaced=bool(args.namespaced),
        cpu_topology=args.cpu_topology,
        volume_storage_class=args.volume_storage_class,
        machine_type=args.machine_type,
    )
    return _print("preference", lambda: (build_preference(options), []))


def _print(kind: str, build: Callable[[], tuple[dict[str, Any], Sequence[str]]]) -> int:
    try:
        obj, warnings = build()
    except FlagError as error:
        print(f"virtctl create {kind}: {error}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(warning, file=sys.stderr)
    sys.stdout.write(dump_manifest(obj))
    return 0
