"""The ISO writer: labels, nested paths, refusals."""

from __future__ import annotations

import io

import pycdlib
import pytest
from virt_domain import IsoError, iso_image, read_iso


def test_nested_files_keep_their_exact_names() -> None:
    image = iso_image(
        "config-2", {"openstack/latest/meta_data.json": b"{}", "openstack/content/0000": b"x"}
    )
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(image))
    try:
        out = io.BytesIO()
        iso.get_file_from_iso_fp(out, rr_path="/openstack/latest/meta_data.json")
        assert out.getvalue() == b"{}"
        assert iso.pvd.volume_identifier.decode().strip() == "config-2"
    finally:
        iso.close()
    assert len(image) % 2048 == 0


def test_long_names_that_collide_in_iso9660_stay_distinct() -> None:
    files = {f"same-long-prefix-for-every-file-{i}": bytes([i]) for i in range(3)}
    image = iso_image("cidata", files)
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(image))
    try:
        for name, data in files.items():
            out = io.BytesIO()
            iso.get_file_from_iso_fp(out, joliet_path=f"/{name}")
            assert out.getvalue() == data
    finally:
        iso.close()


@pytest.mark.parametrize(
    ("label", "files"),
    [
        ("bad label!", {"a": b""}),
        ("ok", {"../escape": b""}),
        ("ok", {"a//b": b""}),
        ("ok", {"/abs": b""}),
    ],
)
def test_refusals(label: str, files: dict[str, bytes]) -> None:
    with pytest.raises(IsoError):
        iso_image(label, files)


def test_read_iso_gives_back_the_label_and_files() -> None:
    files = {"meta-data": b"{}", "openstack/latest/user_data": b"#cloud-config\n"}
    held = read_iso(iso_image("config-2", files))
    assert (held.label, dict(held.files)) == ("config-2", files)
    with pytest.raises(IsoError):
        read_iso(b"not an image" * 100)
