"""A small rtnetlink client: the few link, address and route calls phase 1 needs.

Why our own and not pyroute2: pyroute2 0.9's synchronous `IPRoute` does its socket I/O
from a thread of its own, which does not share the netns a caller's thread joined (tried:
the bridge landed in the host's netns). Here the socket is opened in the calling thread,
so it lives in that thread's netns. Blocking calls: run from a worker thread.
"""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["Address", "Link", "Netlink", "NetlinkError", "Route"]

_NETLINK_ROUTE = 0
_HDR = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_IFINFO = struct.Struct("=BxHiII")  # family, type, index, flags, change
_IFADDR = struct.Struct("=BBBBi")  # family, prefixlen, flags, scope, index
_RTMSG = struct.Struct(
    "=BBBBBBBBI"
)  # family, dst_len, src_len, tos, table, proto, scope, type, flags
_ATTR = struct.Struct("=HH")
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_RTM_NEWLINK, _RTM_GETLINK, _RTM_SETLINK = 16, 18, 19
_RTM_NEWADDR, _RTM_DELADDR, _RTM_GETADDR = 20, 21, 22
_RTM_NEWROUTE, _RTM_GETROUTE = 24, 26
_F_REQUEST, _F_ACK, _F_DUMP = 0x1, 0x4, 0x300
_F_REPLACE, _F_EXCL, _F_CREATE = 0x100, 0x200, 0x400
_NESTED = 0x8000
_IFLA_ADDRESS, _IFLA_IFNAME, _IFLA_MTU, _IFLA_MASTER = 1, 3, 4, 10
_IFLA_PROTINFO, _IFLA_LINKINFO, _IFLA_INFO_KIND = 12, 18, 1
_IFLA_BRPORT_LEARNING = 8
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_RTA_DST, _RTA_OIF, _RTA_GATEWAY, _RTA_TABLE = 1, 4, 5, 15
_IFF_UP = 0x1
_RT_TABLE_MAIN = 254
_RTPROT_STATIC, _RT_SCOPE_UNIVERSE, _RT_SCOPE_LINK, _RTN_UNICAST = 4, 0, 253, 1


class NetlinkError(OSError):
    """The kernel refused a request (errno as the kernel gave it)."""


@dataclass(frozen=True, slots=True)
class Link:
    index: int
    name: str
    mac: str
    mtu: int
    kind: str
    master: int
    up: bool


@dataclass(frozen=True, slots=True)
class Address:
    index: int
    address: str
    prefix_length: int


@dataclass(frozen=True, slots=True)
class Route:
    destination: str
    prefix_length: int
    gateway: str
    index: int


def _attr(kind: int, payload: bytes) -> bytes:
    raw = _ATTR.pack(_ATTR.size + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    offset = 0
    while offset + _ATTR.size <= len(data):
        length, kind = _ATTR.unpack_from(data, offset)
        if length < _ATTR.size:
            return
        yield kind & ~_NESTED, data[offset + _ATTR.size : offset + length]
        offset += (length + 3) & ~3


def _mac(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def _ip(family: int, raw: bytes) -> str:
    return socket.inet_ntop(family, raw)


@dataclass
class Netlink:
    """One NETLINK_ROUTE socket, opened in the caller's thread (and so in its netns)."""

    sock: socket.socket = field(
        default_factory=lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_ROUTE)
    )
    seq: int = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Netlink:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _send(self, kind: int, flags: int, body: bytes) -> int:
        self.seq += 1
        self.sock.send(
            _HDR.pack(_HDR.size + len(body), kind, flags | _F_REQUEST, self.seq, 0) + body
        )
        return self.seq

    def _replies(self, seq: int) -> Iterator[tuple[int, bytes]]:
        while True:
            data = self.sock.recv(1 << 16)
            offset = 0
            while offset + _HDR.size <= len(data):
                length, kind, _flags, got, _pid = _HDR.unpack_from(data, offset)
                body = data[offset + _HDR.size : offset + length]
                offset += (length + 3) & ~3
                if got != seq:
                    continue
                if kind == _NLMSG_DONE:
                    return
                if kind == _NLMSG_ERROR:
                    code = -struct.unpack_from("=i", body)[0]
                    if code:
                        raise NetlinkError(code, errno.errorcode.get(code, str(code)))
                    return
                yield kind, body

    def request(self, kind: int, body: bytes, flags: int = 0) -> None:
        for _ in self._replies(self._send(kind, flags | _F_ACK, body)):
            pass

    def _dump(self, kind: int, body: bytes) -> Iterator[bytes]:
        for _, reply in self._replies(self._send(kind, _F_DUMP, body)):
            yield reply

    # -- reading

    def links(self) -> list[Link]:
        out = []
        for body in self._dump(_RTM_GETLINK, _IFINFO.pack(socket.AF_UNSPEC, 0, 0, 0, 0)):
            _fam, _type, index, flags, _ = _IFINFO.unpack_from(body)
            attrs = dict(_attrs(body[_IFINFO.size :]))
            kind = ""
            for key, value in _attrs(attrs.get(_IFLA_LINKINFO, b"")):
                if key == _IFLA_INFO_KIND:
                    kind = value.rstrip(b"\0").decode()
            out.append(
                Link(
                    index=index,
                    name=attrs.get(_IFLA_IFNAME, b"").rstrip(b"\0").decode(),
                    mac=_mac(attrs.get(_IFLA_ADDRESS, b"")),
                    mtu=struct.unpack("=I", attrs[_IFLA_MTU])[0] if _IFLA_MTU in attrs else 0,
                    kind=kind,
                    master=struct.unpack("=I", attrs[_IFLA_MASTER])[0]
                    if _IFLA_MASTER in attrs
                    else 0,
                    up=bool(flags & _IFF_UP),
                )
            )
        return out

    def addresses(self) -> list[Address]:
        out = []
        for body in self._dump(_RTM_GETADDR, _IFADDR.pack(socket.AF_UNSPEC, 0, 0, 0, 0)):
            family, prefix, _flags, _scope, index = _IFADDR.unpack_from(body)
            attrs = dict(_attrs(body[_IFADDR.size :]))
            raw = attrs.get(_IFA_LOCAL) or attrs.get(_IFA_ADDRESS)
            if raw is not None and family in (socket.AF_INET, socket.AF_INET6):
                out.append(Address(index, _ip(family, raw), prefix))
        return out

    def routes(self) -> list[Route]:
        """The IPv4 unicast routes of the main table."""
        out = []
        query = _RTMSG.pack(socket.AF_INET, 0, 0, 0, 0, 0, 0, 0, 0)
        for body in self._dump(_RTM_GETROUTE, query):
            _fam, dst_len, _src, _tos, table, _proto, _scope, rtype, _f = _RTMSG.unpack_from(body)
            attrs = dict(_attrs(body[_RTMSG.size :]))
            if _RTA_TABLE in attrs:
                table = struct.unpack("=I", attrs[_RTA_TABLE])[0]
            if table != _RT_TABLE_MAIN or rtype != _RTN_UNICAST:
                continue
            dst = _ip(socket.AF_INET, attrs[_RTA_DST]) if _RTA_DST in attrs else "0.0.0.0"
            gateway = _ip(socket.AF_INET, attrs[_RTA_GATEWAY]) if _RTA_GATEWAY in attrs else ""
            oif = struct.unpack("=i", attrs[_RTA_OIF])[0] if _RTA_OIF in attrs else 0
            out.append(Route(dst, dst_len, gateway, oif))
        return out

    # -- changing

    def add_link(self, name: str, kind: str, mac: str = "", mtu: int = 0) -> None:
        attrs = _attr(_IFLA_IFNAME, name.encode() + b"\0")
        attrs += _attr(_IFLA_LINKINFO | _NESTED, _attr(_IFLA_INFO_KIND, kind.encode()))
        if mac:
            attrs += _attr(_IFLA_ADDRESS, bytes.fromhex(mac.replace(":", "")))
        if mtu:
            attrs += _attr(_IFLA_MTU, struct.pack("=I", mtu))
        body = _IFINFO.pack(socket.AF_UNSPEC, 0, 0, 0, 0) + attrs
        self.request(_RTM_NEWLINK, body, _F_CREATE | _F_EXCL)

    def set_link(
        self,
        index: int,
        *,
        name: str = "",
        mac: str = "",
        mtu: int = 0,
        master: int | None = None,
        up: bool | None = None,
    ) -> None:
        attrs = b""
        if name:
            attrs += _attr(_IFLA_IFNAME, name.encode() + b"\0")
        if mac:
            attrs += _attr(_IFLA_ADDRESS, bytes.fromhex(mac.replace(":", "")))
        if mtu:
            attrs += _attr(_IFLA_MTU, struct.pack("=I", mtu))
        if master is not None:
            attrs += _attr(_IFLA_MASTER, struct.pack("=I", master))
        flags = _IFF_UP if up else 0
        change = _IFF_UP if up is not None else 0
        body = _IFINFO.pack(socket.AF_UNSPEC, 0, index, flags, change) + attrs
        self.request(_RTM_NEWLINK, body)

    def set_bridge_port_learning(self, index: int, learning: bool) -> None:
        """`bridge link set dev X learning on|off`: IFLA_PROTINFO on an AF_BRIDGE setlink."""
        info = _attr(_IFLA_BRPORT_LEARNING, struct.pack("=B", int(learning)))
        body = _IFINFO.pack(socket.AF_BRIDGE, 0, index, 0, 0)
        self.request(_RTM_SETLINK, body + _attr(_IFLA_PROTINFO | _NESTED, info))

    def _address(self, kind: int, flags: int, index: int, address: str, prefix: int) -> None:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        raw = socket.inet_pton(family, address)
        attrs = _attr(_IFA_LOCAL, raw) + _attr(_IFA_ADDRESS, raw)
        self.request(
            kind, _IFADDR.pack(family, prefix, 0, _RT_SCOPE_UNIVERSE, index) + attrs, flags
        )

    def add_address(self, index: int, address: str, prefix: int) -> None:
        """Add (or keep) `address/prefix` on the link; an address already there is fine."""
        self._address(_RTM_NEWADDR, _F_CREATE | _F_REPLACE, index, address, prefix)

    def delete_address(self, index: int, address: str, prefix: int) -> None:
        """Remove the address; one already gone (a link-local dropped with the link) is fine."""
        try:
            self._address(_RTM_DELADDR, 0, index, address, prefix)
        except NetlinkError as error:
            if error.errno != errno.EADDRNOTAVAIL:
                raise

    def add_route(self, destination: str, prefix: int, gateway: str, index: int) -> None:
        """An IPv4 main-table route; one already there is replaced (idempotent)."""
        scope = _RT_SCOPE_LINK if not gateway else _RT_SCOPE_UNIVERSE
        body = _RTMSG.pack(
            socket.AF_INET, prefix, 0, 0, _RT_TABLE_MAIN, _RTPROT_STATIC, scope, _RTN_UNICAST, 0
        )
        attrs = _attr(_RTA_OIF, struct.pack("=i", index))
        if prefix:
            attrs += _attr(_RTA_DST, socket.inet_pton(socket.AF_INET, destination))
        if gateway:
            attrs += _attr(_RTA_GATEWAY, socket.inet_pton(socket.AF_INET, gateway))
        self.request(_RTM_NEWROUTE, body + attrs, _F_CREATE | _F_REPLACE)
