"""The export contract: upstream's names and URL layout, bounded to DNS-1035 label length."""

from __future__ import annotations

from kubevirt_api import exports as ex


def test_names_and_urls_are_upstreams() -> None:
    assert ex.exporter_name("exp") == "virt-export-exp"
    assert ex.token_secret_name("exp") == "export-token-exp"
    assert ex.internal_host("exp", "ns") == "virt-export-exp.ns.svc"
    assert ex.volume_url("virt-export-exp.ns.svc", "disk", ex.GZIP_FILE) == (
        "https://virt-export-exp.ns.svc/volumes/disk/disk.img.gz"
    )


def test_long_names_stay_valid_labels_and_distinct() -> None:
    a, b = "x" * 60 + "a", "x" * 60 + "b"
    assert len(ex.exporter_name(a)) == 63
    assert ex.exporter_name(a) != ex.exporter_name(b)
    assert ex.exporter_name(a) == ex.exporter_name(a)  # stable across reconciles


def test_volume_env_for_filesystem_and_block() -> None:
    fs = ex.volume_env(0, "my.disk", block=False)
    assert fs.path == "/export-volumes/my-disk"
    assert fs.raw_uri == "/volumes/my.disk/disk.img"
    block = ex.volume_env(1, "raw", block=True)
    assert block.env() == [
        {"name": "VOLUME1_EXPORT_PATH", "value": "/dev/export-volumes/raw"},
        {"name": "VOLUME1_EXPORT_RAW_URI", "value": "/volumes/raw/disk.img"},
        {"name": "VOLUME1_EXPORT_RAW_GZIP_URI", "value": "/volumes/raw/disk.img.gz"},
    ]
