"""A small authoritative DNS server for `<service>.<namespace>.svc.<domain>`, nothing else.

Pods get it as their only nameserver (the kubelet's clusterDNS): cluster names resolve to
Service ClusterIPs; every other name is refused at once, so nothing is ever forwarded to
an upstream resolver. Services are re-listed from the apiserver every `--interval` seconds.

Run as `python -m kv_cluster.dnsserver --listen IP:PORT --server URL --ca F --cert F --key F`.
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence

from kv_cluster.dnswire import answer, parse_records

__all__ = ["main"]


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
