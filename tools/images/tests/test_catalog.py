"""Every service has a Containerfile that takes its base as a build argument."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kv_images.catalog import CATALOG, SERVICES, closure

ROOT = Path(__file__).resolve().parents[3]


def test_closure_puts_bases_first_once() -> None:
    assert closure(["virt-launcher", "virtctl", "virt-api"]) == [
        "launcher-base",
        "virt-launcher",
        "python-base",
        "virtctl",
        "virt-api",
    ]


def test_unknown_image_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        closure(["no-such-image"])


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_service_containerfile_builds_from_the_base_argument(service: str) -> None:
    text = (ROOT / CATALOG[service].containerfile).read_text()
    assert re.search(r"^ARG BASE=", text, re.M)
    assert re.search(r"^FROM \$\{BASE\}$", text, re.M)
    assert "--no-index" in text, "installs must not reach an index inside the build"


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_every_containerfile_exists(name: str) -> None:
    assert (ROOT / CATALOG[name].containerfile).is_file()
