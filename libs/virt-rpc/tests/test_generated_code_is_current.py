"""The committed generated code matches proto/, and the check notices when it does not."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from virt_rpc.regenerate import (
    GENERATED_DIR,
    StaleGeneratedCodeError,
    check,
    find_proto_root,
    main,
)


def test_committed_code_matches_proto() -> None:
    check()


def test_cli_check_exits_zero_when_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_edited_generated_file_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / "generated"
    shutil.copytree(GENERATED_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "kubevirtpy" / "launcher" / "v1" / "__init__.py"
    target.write_text(target.read_text() + "\n# hand edit\n")
    with pytest.raises(StaleGeneratedCodeError) as err:
        check(generated_dir=copy)
    assert err.value.differences == ["differs kubevirtpy/launcher/v1/__init__.py"]


def test_unchanged_proto_copy_is_current(tmp_path: Path) -> None:
    # Generation does not depend on where the proto files sit (or the working directory).
    protos = tmp_path / "proto"
    shutil.copytree(find_proto_root(), protos)
    check(proto_root=protos)


def test_proto_change_without_regeneration_is_reported(tmp_path: Path) -> None:
    protos = tmp_path / "proto"
    shutil.copytree(find_proto_root(), protos)
    source = protos / "kubevirtpy" / "launcher" / "v1" / "launcher.proto"
    text = source.read_text()
    source.write_text(
        text.replace("message PingResponse {}", "message PingResponse {\n  string note = 1;\n}")
    )
    with pytest.raises(StaleGeneratedCodeError, match=r"virt_rpc\.regenerate") as err:
        check(proto_root=protos)
    assert err.value.differences == ["differs kubevirtpy/launcher/v1/__init__.py"]


def test_missing_generated_file_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / "generated"
    shutil.copytree(GENERATED_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "message_pool.py").unlink()
    with pytest.raises(StaleGeneratedCodeError) as err:
        check(generated_dir=copy)
    assert err.value.differences == ["missing message_pool.py"]
