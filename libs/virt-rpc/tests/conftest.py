"""Fixtures for virt_rpc's unit tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from blockbuster import blockbuster_ctx


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short private directory: unix socket paths must fit in 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="vrpc-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def no_blocking() -> Iterator[None]:
    """Fail the test when a blocking call runs on the event loop thread."""
    with blockbuster_ctx():
        yield
