"""kv-images refuses unknown image names with the list of valid ones."""

from __future__ import annotations

import pytest
from kv_images.cli import main


def test_unknown_image_name_lists_valid_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "--no-import", "virt-nonsense"]) == 1
    err = capsys.readouterr().err
    assert "unknown image(s): virt-nonsense" in err
    assert "virt-launcher" in err
    assert "guest-kernel-boot" in err


def test_list_shows_bases_and_services(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "virt-launcher" in out
    assert "(FROM launcher-base)" in out
