"""Import built images into a node's containerd (namespace k8s.io, where the kubelet looks)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kv_images.host import HostError, require_tools

__all__ = ["NAMESPACE", "Containerd"]

NAMESPACE = "k8s.io"


class Containerd:
    """`ctr` against one containerd socket."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def _ctr(self, *args: str, timeout: float = 600) -> str:
        require_tools({"ctr": "containerd"})
        proc = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", NAMESPACE, *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise HostError(
                f"ctr {' '.join(args[:2])} on {self.socket} failed: {proc.stderr.strip()}"
            )
        return proc.stdout

    def image_names(self) -> set[str]:
        return set(self._ctr("images", "list", "--quiet").split())

    def remove(self, ref: str) -> None:
        """Drop the image reference `ref` (its content goes once nothing else uses it)."""
        self._ctr("images", "remove", ref)

    def import_archive(self, archive: Path, ref: str, aliases: tuple[str, ...] = ()) -> None:
        """Import a docker-archive holding `ref`, then point `aliases` at the same image."""
        self._ctr("images", "import", str(archive))
        self.tag_aliases(ref, aliases)

    def tag_aliases(self, ref: str, aliases: tuple[str, ...]) -> None:
        """Point each alias (e.g. `:devel`) at the image `ref` already in containerd."""
        for alias in aliases:
            self._ctr("images", "tag", "--force", ref, alias)
