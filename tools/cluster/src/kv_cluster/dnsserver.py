"""A small authoritative DNS server for `<service>.<namespace>.svc.<domain>`, nothing else.

Pods get it as their only nameserver (the kubelet's clusterDNS): cluster names resolve to
Service ClusterIPs; every other name is refused at once, so nothing is ever forwarded to
an upstream resolver. Services are re-listed from the apiserver every `--interval` seconds.

Run as `python -m kv_cluster.dnsserver --listen IP:PORT --server URL --ca F --cert F --key F`.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence

__all__ = ["answer", "encode_query", "main", "parse_records"]

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


class _Records:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[str, str] = {}


def _poll(args: argparse.Namespace, store: _Records) -> None:
    ctx = ssl.create_default_context(cafile=args.ca)
    ctx.load_cert_chain(args.cert, args.key)
    url = f"{args.server.rstrip('/')}/api/v1/services"
    while True:
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
                records = parse_records(json.load(resp), args.domain)
            with store.lock:
                store.records = records
        except (OSError, ValueError) as exc:
            print(f"dnsserver: listing services failed: {exc}", file=sys.stderr, flush=True)
        time.sleep(args.interval)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kv_cluster.dnsserver")
    parser.add_argument("--listen", required=True, help="IP:PORT")
    parser.add_argument("--server", required=True, help="apiserver URL")
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--domain", default="cluster.local")
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    store = _Records()
    threading.Thread(target=_poll, args=(args, store), daemon=True).start()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, int(port)))
    print(f"dnsserver: serving {args.domain} on {args.listen}", file=sys.stderr, flush=True)
    while True:
        query, peer = sock.recvfrom(4096)
        with store.lock:
            records = store.records
        reply = answer(query, records, args.domain.lower())
        if reply is not None:
            sock.sendto(reply, peer)


if __name__ == "__main__":
    raise SystemExit(main())
