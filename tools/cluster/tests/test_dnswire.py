"""The cluster DNS answers Service names, and refuses everything outside the cluster domain."""

from __future__ import annotations

import struct

from kv_cluster.dnswire import answer, encode_query, parse_records

DOMAIN = "cluster.local"
SERVICES = {
    "items": [
        {
            "metadata": {"name": "kubernetes", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.1"},
        },
        {"metadata": {"name": "headless", "namespace": "x"}, "spec": {"clusterIP": "None"}},
    ]
}


def _rcode(reply: bytes) -> int:
    return struct.unpack("!H", reply[2:4])[0] & 0xF


def test_service_name_resolves_to_its_cluster_ip() -> None:
    records = parse_records(SERVICES, DOMAIN)
    assert records == {"kubernetes.default.svc.cluster.local": "10.96.0.1"}
    reply = answer(encode_query("Kubernetes.Default.svc.cluster.local"), records, DOMAIN)
    assert reply is not None
    assert _rcode(reply) == 0
    assert reply[6:8] == b"\x00\x01"  # one answer
    assert reply.endswith(bytes([10, 96, 0, 1]))


def test_unknown_cluster_name_is_nxdomain_and_outside_names_are_refused() -> None:
    records = parse_records(SERVICES, DOMAIN)
    missing = answer(encode_query("nope.default.svc.cluster.local"), records, DOMAIN)
    outside = answer(encode_query("example.com"), records, DOMAIN)
    assert missing is not None
    assert _rcode(missing) == 3
    assert outside is not None
    assert _rcode(outside) == 5


def test_garbage_gets_formerr_or_silence() -> None:
    assert answer(b"\x00", {}, DOMAIN) is None
    truncated = encode_query("kubernetes.default.svc.cluster.local")[:20]
    reply = answer(truncated, {}, DOMAIN)
    assert reply is not None
    assert _rcode(reply) == 1
