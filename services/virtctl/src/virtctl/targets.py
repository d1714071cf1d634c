"""The argument forms of `port-forward`, `ssh` and `scp`, parsed as upstream's virtctl does.

- a target: `type/name[/namespace]`, type one of vm, vms, virtualmachine(s), vmi, vmis,
  virtualmachineinstance(s);
- an ssh target: `[user@]` before it; an scp location: `[user@]type/name[/namespace]:path`
  or a local path;
- a forwarded port: `[protocol/]local[:remote]`, protocol tcp (default) or udp.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ForwardedPort",
    "RemotePath",
    "Target",
    "TargetError",
    "parse_port",
    "parse_scp_location",
    "parse_ssh_target",
    "parse_target",
]

_KINDS = {
    "vm": "vm",
    "vms": "vm",
    "virtualmachine": "vm",
    "virtualmachines": "vm",
    "vmi": "vmi",
    "vmis": "vmi",
    "virtualmachineinstance": "vmi",
    "virtualmachineinstances": "vmi",
}


class TargetError(ValueError):
    """An argument that is not one of the forms; the message says which."""


@dataclass(frozen=True, slots=True)
class Target:
    """A VM or VMI: `kind` is `vm` or `vmi`; `namespace` None means the context's."""

    kind: str
    name: str
    namespace: str | None = None
    user: str | None = None

    @property
    def resource(self) -> str:
        """The subresource API's plural for the kind."""
        return "virtualmachines" if self.kind == "vm" else "virtualmachineinstances"


@dataclass(frozen=True, slots=True)
class ForwardedPort:
    """One `[protocol/]local[:remote]`; local 0 lets the system choose."""

    local: int
    remote: int
    protocol: str = "tcp"


@dataclass(frozen=True, slots=True)
class RemotePath:
    """The guest side of an scp: a target and the path in the guest."""

    target: Target
    path: str


def parse_target(text: str) -> Target:
    """`type/name[/namespace]` (upstream's ParseTarget)."""
    if not text:
        raise TargetError("target cannot be empty")
    parts = text.split("/")
    if len(parts) == 1:
        raise TargetError(f"target {text!r} must contain type and name separated by '/'")
    if len(parts) > 3:
        raise TargetError(f"target {text!r} is not valid with more than two '/'")
    kind = _KINDS.get(parts[0].lower())
    if kind is None:
        raise TargetError(f"unsupported resource type {parts[0]!r}; use vm or vmi")
    if not parts[1]:
        raise TargetError("name cannot be empty")
    namespace = None
    if len(parts) == 3:
        if not parts[2]:
            raise TargetError("namespace cannot be empty")
        namespace = parts[2]
    return Target(kind, parts[1], namespace)


def parse_ssh_target(text: str) -> Target:
    """`[user@]type/name[/namespace]`."""
    user, at, rest = text.rpartition("@")
    target = parse_target(rest if at else text)
    if at and not user:
        raise TargetError("the user before '@' cannot be empty")
    return Target(target.kind, target.name, target.namespace, user or None)


def parse_scp_location(text: str) -> RemotePath | None:
    """The guest side `[user@]type/name[/namespace]:path`, or None for a local path."""
    head, colon, path = text.partition(":")
    if not colon or "/" not in head:
        return None
    kind = head.rpartition("@")[2].split("/", 1)[0].lower()
    if kind not in _KINDS:
        return None  # e.g. ./dir/file:with-colon is a local path
    return RemotePath(parse_ssh_target(head), path)


def _port_number(text: str, what: str, *, zero: bool) -> int:
    if not text.isdigit() or not (0 if zero else 1) <= int(text) <= 65535:
        low = 0 if zero else 1
        raise TargetError(f"{what} port {text!r} must be a number within {low}-65535")
    return int(text)


def parse_port(text: str) -> ForwardedPort:
    """`[protocol/]local[:remote]` (upstream's parsePort; remote defaults to local)."""
    protocol, slash, ports = text.rpartition("/")
    protocol = protocol.lower() if slash else "tcp"
    if protocol not in ("tcp", "udp"):
        raise TargetError(f"protocol {protocol!r} is not supported; use tcp or udp")
    local_text, colon, remote_text = ports.partition(":")
    if not local_text and not colon:
        raise TargetError(f"invalid port {text!r}, missing local and/or remote port")
    # kubectl's `:22`: any free local port.
    local = _port_number(local_text or "0", "local", zero=bool(colon))
    remote = _port_number(remote_text, "remote", zero=False) if colon else local
    if remote == 0:
        raise TargetError(f"invalid port {text!r}: the remote port cannot be 0")
    return ForwardedPort(local, remote, protocol)
