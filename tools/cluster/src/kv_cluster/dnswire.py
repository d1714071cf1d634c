"""DNS messages for the cluster DNS: Service records from a ServiceList, answers, queries.

Pure functions over bytes (no sockets): `dnsserver` serves them, `dns` probes with them.
"""

from __future__ import annotations

import ipaddress
import socket
import struct
from collections.abc import Mapping

__all__ = ["answer", "encode_query", "parse_records"]

_A, _AAAA, _IN = 1, 28, 1
_NOERROR, _FORMERR, _NXDOMAIN, _REFUSED = 0, 1, 3, 5
_TTL = 5


def parse_records(services: Mapping[str, object], domain: str) -> dict[str, str]:
    """name (lower case, no trailing dot) -> IPv4 ClusterIP, from a ServiceList."""
    records: dict[str, str] = {}
    items = services.get("items", [])
    if not isinstance(items, list):
        return records
    for item in items:
        meta = item.get("metadata", {}) if isinstance(item, dict) else {}
        spec = item.get("spec", {}) if isinstance(item, dict) else {}
        ip = spec.get("clusterIP") if isinstance(spec, dict) else None
        name, namespace = meta.get("name"), meta.get("namespace")
        if not (isinstance(ip, str) and isinstance(name, str) and isinstance(namespace, str)):
            continue
        try:
            if ipaddress.ip_address(ip).version != 4:
                continue
        except ValueError:
            continue  # "None" for headless services
        records[f"{name}.{namespace}.svc.{domain}".lower()] = ip
    return records


def _read_name(packet: bytes, offset: int) -> tuple[str, int]:
    labels: list[str] = []
    while True:
        if offset >= len(packet):
            raise ValueError("name runs past the packet")
        length = packet[offset]
        offset += 1
        if length == 0:
            return ".".join(labels), offset
        if length & 0xC0:
            raise ValueError("compressed names are not expected in a question")
        labels.append(packet[offset : offset + length].decode("ascii", "replace"))
        offset += length


def answer(query: bytes, records: Mapping[str, str], domain: str) -> bytes | None:
    """The response to one query packet, or None for something that is not a query."""
    if len(query) < 12:
        return None
    ident, flags, qdcount = struct.unpack("!HHH", query[:6])
    if flags & 0x8000:
        return None  # a response, not a query
    rd = flags & 0x0100
    try:
        if qdcount != 1:
            raise ValueError("one question expected")
        name, end = _read_name(query, 12)
        qtype, qclass = struct.unpack("!HH", query[end : end + 4])
    except (ValueError, struct.error):
        return struct.pack("!HHHHHH", ident, 0x8000 | rd | _FORMERR, 0, 0, 0, 0)
    question = query[12 : end + 4]
    lowered = name.lower().rstrip(".")
    ours = lowered == domain or lowered.endswith("." + domain)
    answers = b""
    if not ours:
        rcode, aa = _REFUSED, 0
    elif lowered in records:
        rcode, aa = _NOERROR, 0x0400
        if qtype == _A and qclass == _IN:
            rdata = socket.inet_aton(records[lowered])
            answers = struct.pack("!HHHIH", 0xC00C, _A, _IN, _TTL, len(rdata)) + rdata
    else:
        rcode, aa = _NXDOMAIN, 0x0400
    header = struct.pack("!HHHHHH", ident, 0x8000 | aa | rd | rcode, 1, 1 if answers else 0, 0, 0)
    return header + question + answers


def encode_query(name: str, qtype: int = _A, ident: int = 0x4B56) -> bytes:
    """A recursion-desired query for `name` (used by health checks and tests)."""
    qname = b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    return (
        struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + qname + struct.pack("!HH", qtype, _IN)
    )
