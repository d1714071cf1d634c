"""A Containerfile that fails stops the build with the failing step named."""

from __future__ import annotations

from pathlib import Path

import pytest
from kv_images import BuildError, Progress
from kv_images.buildah import Buildah


def test_failing_step_is_named(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    (context / "present.txt").write_text("here\n")
    containerfile = context / "Containerfile"
    containerfile.write_text(
        "FROM scratch\nCOPY present.txt /present.txt\nCOPY missing.txt /missing.txt\n"
    )
    buildah = Buildah(tmp_path / "storage", tmp_path / "run")
    with pytest.raises(BuildError) as raised:
        buildah.build(
            image="broken",
            containerfile=containerfile,
            context=context,
            tag="docker.io/kubevirt-py/broken:test",
            build_args={},
            progress=Progress(),
        )
    error = raised.value
    assert error.step is not None
    assert error.step.startswith("3/3 `COPY missing.txt /missing.txt`")
    assert "broken: build failed at step 3/3" in str(error)
    assert "missing.txt" in str(error)
