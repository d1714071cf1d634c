"""`virtctl create vm`: a VirtualMachine from flags, with upstream's defaults and rules.

Defaults: name `vm-<5 random characters>`, runStrategy Always, terminationGracePeriod
180, guest memory 512Mi (dropped when an instancetype is given or explicitly inferred).
Instancetype and preference are inferred from the first boot volume unless a matcher or
--memory is given; implicit inference is best effort (`inferFromVolumeFailurePolicy:
Ignore`, nothing set when the volume cannot carry the labels), explicit inference fails
loudly. Volumes that need CDI (DataVolumes: --volume-import and its aliases) are refused:
kubevirt-py has no CDI.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from virtctl.creating.params import (
    FlagError,
    ParamKind,
    check_dns_label,
    check_quantity,
    parse_params,
    random_suffix,
    split_prefixed_name,
)

__all__ = ["CDI_VOLUME_FLAGS", "VmOptions", "build_vm"]

#: Flags whose volumes are CDI DataVolumes (the last three are upstream's deprecated
#: aliases of --volume-import).
CDI_VOLUME_FLAGS: Final = ("volume-import", "volume-datasource", "volume-clone-pvc", "volume-blank")
# Upstream's order in its error message.
_RUN_STRATEGIES: Final = ("Always", "Manual", "Halted", "Once", "RerunOnFailure")
_CLOUD_INIT_TYPES: Final = ("nocloud", "configdrive", "none")
_CLOUD_INIT_DISK: Final = "cloudinitdisk"
_SYSPREP_DISK: Final = "sysprepdisk"
_CLOUD_CONFIG: Final = "#cloud-config"
_VOLUME_PARAMS: Final[Mapping[str, ParamKind]] = {"name": "str", "src": "str", "bootorder": "uint"}
_INSTANCETYPE_KINDS: Final = ("virtualmachineinstancetype", "virtualmachineclusterinstancetype")
_PREFERENCE_KINDS: Final = ("virtualmachinepreference", "virtualmachineclusterpreference")
_PASSWORD_WARNING: Final = (
    "WARNING: --password-file: The password is stored in cleartext in the VM definition!"
)


@dataclass
class VmOptions:
    """The flags of `create vm`. None means "not given" (upstream's Changed()), which
    decides defaults: e.g. an explicit --infer-instancetype makes inference strict."""

    name: str | None = None
    namespace: str | None = None
    run_strategy: str | None = None
    termination_grace_period: int = 180
    memory: str | None = None
    instancetype: str | None = None
    infer_instancetype: bool | None = None
    infer_instancetype_from: str | None = None
    preference: str | None = None
    infer_preference: bool | None = None
    infer_preference_from: str | None = None
    containerdisks: Sequence[str] = field(default_factory=tuple)
    pvcs: Sequence[str] = field(default_factory=tuple)
    sysprep: str | None = None
    user: str | None = None
    password_file: str | None = None
    ssh_keys: Sequence[str] | None = None
    ga_manage_ssh: bool | None = None
    access_creds: Sequence[str] = field(default_factory=tuple)
    cloud_init: str | None = None
    cloud_init_user_data: str | None = None
    cloud_init_network_data: str | None = None
    #: flag name -> its values, for the flags kubevirt-py refuses (CDI_VOLUME_FLAGS).
    cdi_volumes: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass
class _Build:
    """The VM being built and what the flags decided along the way."""

    options: VmOptions
    vm: dict[str, Any]
    boot_orders: dict[int, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.vm["spec"]["template"]["spec"]
        return spec

    @property
    def volumes(self) -> list[dict[str, Any]]:
        volumes: list[dict[str, Any]] = self.spec.setdefault("volumes", [])
        return volumes

    def volume(self, name: str) -> dict[str, Any] | None:
        return next((v for v in self.spec.get("volumes", []) if v["name"] == name), None)

    def add_volume(self, flag: str, volume: dict[str, Any], boot_order: object) -> None:
        if self.volume(volume["name"]) is not None:
            raise FlagError(flag, f'there is already a volume with name "{volume["name"]}"')
        self.volumes.append(volume)
        if boot_order is None:
            return
        assert isinstance(boot_order, int)
        if boot_order == 0:
            raise FlagError(flag, "bootorder must be greater than 0")
        if boot_order in self.boot_orders:
            raise FlagError(flag, f"bootorder {boot_order} was specified multiple times")
        self.spec["domain"]["devices"].setdefault("disks", []).append(
            {"bootOrder": boot_order, "name": volume["name"]}
        )
        self.boot_orders[boot_order] = volume["name"]


def build_vm(options: VmOptions) -> tuple[dict[str, Any], list[str]]:
    """The VirtualMachine, and warnings for stderr. Raises FlagError naming the flag,
    what was wrong and what would be valid."""
    for flag, values in options.cdi_volumes.items():
        if values:
            raise FlagError(
                flag,
                "the volume would be a DataVolume, which needs CDI (the Containerized Data "
                "Importer); kubevirt-py has no CDI: use --volume-containerdisk or --volume-pvc",
            )
    memory = options.memory if options.memory is not None else "512Mi"
    check_quantity("memory", memory)
    name = options.name if options.name is not None else f"vm-{random_suffix()}"
    metadata = {"name": name}
    if options.namespace is not None:
        metadata["namespace"] = options.namespace
    vm: dict[str, Any] = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": metadata,
        "spec": {
            "runStrategy": "Always",
            "template": {
                "spec": {
                    "domain": {"devices": {}, "memory": {"guest": memory}},
                    "terminationGracePeriodSeconds": options.termination_grace_period,
                }
            },
        },
    }
    # A copy: access credentials switch --ga-manage-ssh / --cloud-init on as flags would.
    build = _Build(dataclasses.replace(options), vm)
    # Upstream's order: each flag given, then cloud-init, then inference.
    for given, step in _STEPS:
        if given(options):
            step(build)
    _cloud_init(build)
    _infer(build)
    return vm, build.warnings


def _run_strategy(build: _Build) -> None:
    wanted = build.options.run_strategy or ""
    for strategy in _RUN_STRATEGIES:
        if strategy.lower() == wanted.lower():
            build.vm["spec"]["runStrategy"] = strategy
            return
    raise FlagError(
        "run-strategy",
        f'invalid run strategy "{wanted}", supported values are: {", ".join(_RUN_STRATEGIES)}',
    )


def _matcher(flag: str, text: str, kinds: Sequence[str], what: str) -> dict[str, str]:
    kind, name = split_prefixed_name(flag, text)
    kind = kind.lower()
    if kind and kind not in kinds:
        raise FlagError(
            flag, f'invalid {what} kind "{kind}", supported values are: {", ".join(kinds)}'
        )
    return {"kind": kind, "name": name} if kind else {"name": name}


def _instancetype(build: _Build) -> None:
    assert build.options.instancetype is not None
    matcher = _matcher(
        "instancetype", build.options.instancetype, _INSTANCETYPE_KINDS, "instancetype"
    )
    build.spec["domain"].pop("memory", None)
    build.vm["spec"]["instancetype"] = matcher


def _preference(build: _Build) -> None:
    assert build.options.preference is not None
    matcher = _matcher("preference", build.options.preference, _PREFERENCE_KINDS, "preference")
    build.vm["spec"]["preference"] = matcher


def _containerdisks(build: _Build) -> None:
    flag = "volume-containerdisk"
    for index, value in enumerate(build.options.containerdisks):
        params = parse_params(flag, value, _VOLUME_PARAMS)
        if not params.get("src"):
            raise FlagError(flag, "src must be specified")
        name = str(params.get("name") or f"{build.vm['metadata']['name']}-containerdisk-{index}")
        check_dns_label(flag, name)
        volume = {"containerDisk": {"image": str(params["src"])}, "name": name}
        build.add_volume(flag, volume, params.get("bootorder"))


def _pvcs(build: _Build) -> None:
    flag = "volume-pvc"
    for value in build.options.pvcs:
        params = parse_params(flag, value, _VOLUME_PARAMS)
        if not params.get("src"):
            raise FlagError(flag, "src must be specified")
        namespace, claim = split_prefixed_name(flag, str(params["src"]), "src invalid: ")
        if namespace:
            raise FlagError(flag, f'not allowed to specify namespace of pvc "{claim}"')
        name = check_dns_label(flag, str(params.get("name") or claim))
        volume = {"name": name, "persistentVolumeClaim": {"claimName": claim}}
        build.add_volume(flag, volume, params.get("bootorder"))


def _sysprep(build: _Build) -> None:
    flag = "volume-sysprep"
    assert build.options.sysprep is not None
    params = parse_params(flag, build.options.sysprep, {"src": "str", "type": "str"})
    if not params.get("src"):
        raise FlagError(flag, "src must be specified")
    namespace, source = split_prefixed_name(flag, str(params["src"]), "src invalid: ")
    if namespace:
        raise FlagError(flag, f'not allowed to specify namespace of configmap or secret "{source}"')
    kind = str(params.get("type") or "configmap").lower()
    if kind not in ("configmap", "secret"):
        raise FlagError(
            flag,
            f'invalid sysprep source type "{params["type"]}", supported values are: configmap, secret',
        )
    reference = "configMap" if kind == "configmap" else "secret"
    build.add_volume(flag, {"name": _SYSPREP_DISK, "sysprep": {reference: {"name": source}}}, None)


def _access_creds(build: _Build) -> None:
    flag = "access-cred"
    credentials = build.spec.setdefault("accessCredentials", [])
    for value in build.options.access_creds:
        params = parse_params(
            flag, value, {"type": "str", "src": "str", "method": "str", "user": "str"}
        )
        if not params.get("src"):
            raise FlagError(flag, "src must be specified")
        namespace, secret = split_prefixed_name(flag, str(params["src"]), "src invalid: ")
        if namespace:
            raise FlagError(flag, f'not allowed to specify namespace of secret "{secret}"')
        kind = str(params.get("type", "")).lower()
        method = str(params.get("method", "")).lower()
        user = str(params.get("user", ""))
        if kind in ("ssh", ""):
            propagation = _ssh_propagation(build, method, user)
            credentials.append(
                {
                    "sshPublicKey": {
                        "propagationMethod": propagation,
                        "source": {"secret": {"secretName": str(params["src"])}},
                    }
                }
            )
        elif kind == "password":
            if method not in ("", "ga"):
                raise FlagError(
                    flag,
                    f'invalid access credentials password method "{params["method"]}", '
                    "supported values are: ga",
                )
            if user:
                raise FlagError(flag, _USER_NOT_HERE)
            credentials.append(
                {
                    "userPassword": {
                        "propagationMethod": {"qemuGuestAgent": {}},
                        "source": {"secret": {"secretName": str(params["src"])}},
                    }
                }
            )
        else:
            raise FlagError(
                flag,
                f'invalid access credential type "{params["type"]}", supported values are: '
                "ssh, password",
            )


_USER_NOT_HERE: Final = "user cannot be specified with selected access credential type and method"


def _ssh_propagation(build: _Build, method: str, user: str) -> dict[str, Any]:
    """sshPublicKey.propagationMethod; adjusts --ga-manage-ssh / --cloud-init when unset."""
    options = build.options
    if method in ("ga", ""):
        users = user or options.user or ""
        if not users:
            raise FlagError(
                "access-cred",
                'user must be specified with access credential ssh method ga ("--user" flag '
                'or param "user")',
            )
        if options.ga_manage_ssh is None:
            options.ga_manage_ssh = True  # the agent needs leave to write authorized_keys
        return {"qemuGuestAgent": {"users": [users]}}
    if method in ("nocloud", "configdrive"):
        if user:
            raise FlagError("access-cred", _USER_NOT_HERE)
        if options.cloud_init is None:
            options.cloud_init = method
        if options.cloud_init.lower() != method:
            raise FlagError(
                "access-cred",
                f"method param and value passed to --cloud-init have to match: {method} vs "
                f"{options.cloud_init}",
            )
        return {"noCloud": {}} if method == "nocloud" else {"configDrive": {}}
    raise FlagError(
        "access-cred",
        f'invalid access credentials ssh method "{method}", supported values are: ga, '
        "nocloud, configdrive",
    )


_STEPS: Final[tuple[tuple[Callable[[VmOptions], bool], Callable[[_Build], None]], ...]] = (
    (lambda o: o.run_strategy is not None, _run_strategy),
    (lambda o: o.instancetype is not None, _instancetype),
    (lambda o: o.preference is not None, _preference),
    (lambda o: bool(o.containerdisks), _containerdisks),
    (lambda o: bool(o.pvcs), _pvcs),
    (lambda o: o.sysprep is not None, _sysprep),
    (lambda o: bool(o.access_creds), _access_creds),
)


def _cloud_init(build: _Build) -> None:
    options = build.options
    given = [
        options.user,
        options.password_file,
        options.ssh_keys,
        options.ga_manage_ssh,
        options.cloud_init,
        options.cloud_init_user_data,
        options.cloud_init_network_data,
    ]
    if all(value is None for value in given):
        return
    if options.password_file is not None:
        build.warnings.append(_PASSWORD_WARNING)
    if build.volume(_CLOUD_INIT_DISK) is not None:
        raise FlagError("cloud-init", f'there is already a volume with name "{_CLOUD_INIT_DISK}"')
    kind = (options.cloud_init or "nocloud").lower()
    if kind == "none":
        others = (
            options.password_file,
            options.ssh_keys,
            options.ga_manage_ssh,
            options.cloud_init_user_data,
            options.cloud_init_network_data,
        )
        if any(value is not None for value in others):
            build.warnings.append(
                "WARNING: --cloud-init: was set to none, not creating a data source although "
                "other cloud-init options were set"
            )
        return
    if kind not in _CLOUD_INIT_TYPES:
        raise FlagError(
            "cloud-init",
            f'invalid cloud-init data source type "{options.cloud_init}", supported values '
            f"are: {', '.join(_CLOUD_INIT_TYPES)}",
        )
    source: dict[str, str] = {}
    if options.cloud_init_network_data:
        source["networkDataBase64"] = options.cloud_init_network_data
    if options.cloud_init_user_data:
        source["userDataBase64"] = options.cloud_init_user_data
    else:
        source["userData"] = _cloud_config(options)
    if options.cloud_init is None and source == {"userData": _CLOUD_CONFIG}:
        return  # nothing to say to cloud-init: no volume
    key = "cloudInitNoCloud" if kind == "nocloud" else "cloudInitConfigDrive"
    build.volumes.append({key: source, "name": _CLOUD_INIT_DISK})


def _cloud_config(options: VmOptions) -> str:
    """The generated user data: user, password, authorized keys, agent leave for SSH."""
    config = _CLOUD_CONFIG
    if options.user:
        config += f"\nuser: {options.user}"
    if options.password_file:
        try:
            password = Path(options.password_file).read_text().strip()
        except OSError as error:
            raise FlagError("password-file", f"{error.strerror}: {options.password_file}") from None
        if password:
            config += f"\npassword: {password}\nchpasswd: {{ expire: False }}"
    if options.ssh_keys:
        config += "\nssh_authorized_keys:" + "".join(f"\n  - {k}" for k in options.ssh_keys)
    if options.ga_manage_ssh:
        config += "\nruncmd:\n  - [ setsebool, -P, 'virt_qemu_ga_manage_ssh', 'on' ]"
    return config


def _infer(build: _Build) -> None:
    options = build.options
    if (
        options.infer_instancetype is not False
        and options.instancetype is None
        and options.memory is None
    ):
        explicit = (
            options.infer_instancetype is not None or options.infer_instancetype_from is not None
        )
        try:
            matcher = _inferred(build, options.infer_instancetype_from, explicit)
        except _InferenceError as error:
            if explicit:
                flag = (
                    "infer-instancetype-from"
                    if options.infer_instancetype_from
                    else "infer-instancetype"
                )
                raise FlagError(flag, str(error)) from None
        else:
            build.vm["spec"]["instancetype"] = matcher
            if explicit:
                build.spec["domain"].pop("memory", None)
    if options.infer_preference is not False and options.preference is None:
        explicit = options.infer_preference is not None or options.infer_preference_from is not None
        try:
            matcher = _inferred(build, options.infer_preference_from, explicit)
        except _InferenceError as error:
            if explicit:
                flag = (
                    "infer-preference-from" if options.infer_preference_from else "infer-preference"
                )
                raise FlagError(flag, str(error)) from None
        else:
            build.vm["spec"]["preference"] = matcher


class _InferenceError(Exception):
    """The volume to infer from is missing or cannot carry the inference labels."""


def _inferred(build: _Build, volume_name: str | None, explicit: bool) -> dict[str, str]:
    """The matcher inferring from `volume_name` (default: the first boot volume)."""
    if volume_name is None:
        if not build.spec.get("volumes"):
            raise _InferenceError(
                "at least one volume is needed to infer an instance type or preference"
            )
        volume_name = (
            build.boot_orders[min(build.boot_orders)]
            if build.boot_orders
            else build.volumes[0]["name"]
        )
    volume = build.volume(volume_name)
    if volume is None:
        raise _InferenceError(f'there is no volume with name "{volume_name}"')
    # Only a PVC (or a DataVolume/DataSource, which need CDI) carries the
    # instancetype.kubevirt.io/default-instancetype and -preference labels.
    if "persistentVolumeClaim" not in volume:
        raise _InferenceError(
            "inference of instancetype or preference works only with datasources, "
            "datavolumes or pvcs"
        )
    matcher = {"inferFromVolume": volume_name}
    if not explicit:
        matcher["inferFromVolumeFailurePolicy"] = "Ignore"
    return matcher
