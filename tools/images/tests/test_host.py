"""A missing host program is reported with the Debian package that ships it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kv_images.host import HostError, missing_packages, require_tools


def test_missing_programs_name_their_packages(tmp_path: Path) -> None:
    assert missing_packages({"sh": "dash", "kv-no-such-tool": "kv-pkg"}) == ["kv-pkg"]
    assert missing_packages({}, files={tmp_path / "absent": "syslinux-common"}) == [
        "syslinux-common"
    ]


def test_require_tools_says_how_to_install() -> None:
    with pytest.raises(HostError, match=r"apt-get install kv-pkg"):
        require_tools({"kv-no-such-tool": "kv-pkg"})
