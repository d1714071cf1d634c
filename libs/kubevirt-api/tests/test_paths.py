"""The one rule for paths inside images and on the host."""

from __future__ import annotations

import pytest
from kubevirt_api import image_path_problem


@pytest.mark.parametrize(
    "path", ["/disk/image.qcow2", "/boot/vmlinuz-6.1+deb12", "/var/data/disk.img", "/a", "/.hidden"]
)
def test_valid(path: str) -> None:
    assert image_path_problem(path) is None


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("", "absolute path such as"),
        ("disk/image", "start with /"),
        ("/", "root directory"),
        ("/disk/", "no empty components"),
        ("//disk", "no empty components"),
        ("/a//b", "no empty components"),
        ("/disk/../etc/shadow", "'..'"),
        ("/./x", "'.'"),
        ("/disk/my image.img", "only letters"),
        ("/a\x00b", "only letters"),
        ("/disk/$(reboot)", "only letters"),
        ("/dïsk", "only letters"),
    ],
)
def test_refused(path: str, problem: str) -> None:
    found = image_path_problem(path)
    assert found is not None
    assert problem in found
