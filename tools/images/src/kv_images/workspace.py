"""Where things are: the workspace checkout and the image cache."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Layout", "cluster_state_dir", "find_workspace"]


def cluster_state_dir() -> Path:
    """The local cluster's state dir, as kv-cluster finds it: $KV_CLUSTER_STATE_DIR, else
    $XDG_STATE_HOME/kubevirt-py/cluster (~/.local/state/kubevirt-py/cluster)."""
    state = os.environ.get("KV_CLUSTER_STATE_DIR")
    if state:
        return Path(state).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "kubevirt-py" / "cluster"


def find_workspace(start: Path | None = None) -> Path:
    """The kubevirt-py checkout: KV_IMAGES_WORKSPACE, else the first parent holding uv.lock and tools/images."""
    explicit = os.environ.get("KV_IMAGES_WORKSPACE")
    if explicit:
        return Path(explicit).resolve()
    for candidate in [(start or Path.cwd()).resolve(), Path(__file__).resolve()]:
        for parent in [candidate, *candidate.parents]:
            if (parent / "uv.lock").is_file() and (parent / "tools" / "images").is_dir():
                return parent
    raise FileNotFoundError(
        "cannot find the kubevirt-py workspace (a directory with uv.lock and tools/images)"
    )


@dataclass(frozen=True)
class Layout:
    """The image cache: ~/.cache/kubevirt-py/images (or $KV_IMAGES_CACHE_DIR), keyed by content."""

    root: Path

    @classmethod
    def default(cls) -> Layout:
        explicit = os.environ.get("KV_IMAGES_CACHE_DIR")
        if explicit:
            return cls(Path(explicit).expanduser().resolve())
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg) if xdg else Path.home() / ".cache"
        return cls(base / "kubevirt-py" / "images")

    @property
    def archives(self) -> Path:
        """One docker-archive per built image: <name>-<tag>.tar."""
        return self.root / "archives"

    @property
    def rootfs(self) -> Path:
        return self.root / "rootfs"

    @property
    def debs(self) -> Path:
        return self.root / "debs"

    @property
    def wheels(self) -> Path:
        return self.root / "wheels"

    @property
    def guest(self) -> Path:
        return self.root / "guest"

    @property
    def storage(self) -> Path:
        """buildah's containers-storage (vfs); disposable, archives are the cache."""
        return self.root / "storage"

    @property
    def runroot(self) -> Path:
        return self.root / "run"

    @property
    def index(self) -> Path:
        """index.json: image name -> its current reference, tag, archive and size."""
        return self.root / "index.json"

    def work(self) -> Path:
        path = self.root / "work"
        path.mkdir(parents=True, exist_ok=True)
        return path
