"""Content keys: a build's cache key is the sha256 of everything that decides its output."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["ContentKey", "file_digest", "tree_digest"]

_SKIP_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", "tests"})


def file_digest(path: Path) -> str:
    """sha256 hex of one file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_digest(root: Path) -> str:
    """sha256 over the relative paths, modes and contents of the files under `root`.

    Caches and tests are skipped: they never end up in an image. Symlinks are hashed as
    their target text, never followed.
    """
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            h.update(rel.encode() + b"\0")
            if path.is_symlink():
                h.update(b"L" + os.readlink(path).encode())
            else:
                h.update(b"%o" % (path.stat().st_mode & 0o111))
                h.update(file_digest(path).encode())
            h.update(b"\n")
    return h.hexdigest()


class ContentKey:
    """An incremental, order-sensitive digest of labelled parts."""

    def __init__(self, kind: str) -> None:
        self._h = hashlib.sha256(f"kv-images/{kind}\n".encode())

    def add(self, label: str, value: str | bytes) -> ContentKey:
        data = value.encode() if isinstance(value, str) else value
        self._h.update(f"{label}:{len(data)}:".encode() + data + b"\n")
        return self

    def add_all(self, label: str, values: Iterable[str]) -> ContentKey:
        for value in values:
            self.add(label, value)
        return self

    def hexdigest(self) -> str:
        return self._h.hexdigest()
