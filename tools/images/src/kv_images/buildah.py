"""buildah without a daemon: vfs storage in the cache, chroot isolation.

Chroot isolation cannot drop the network (buildah refuses `--network none` with it), so
builds stay offline by construction: contexts carry every input, pip runs with --no-index.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kv_images.host import require_tools
from kv_images.progress import Progress

__all__ = ["BuildError", "Buildah"]

_STEP = re.compile(r"^STEP (\d+)/(\d+): (.*)$")
_POLICY = {"default": [{"type": "insecureAcceptAnything"}]}


class BuildError(RuntimeError):
    """A Containerfile failed; `step` is the instruction that failed (None before the first)."""

    def __init__(self, image: str, step: str | None, exit_code: int, tail: list[str]) -> None:
        where = f"step {step}" if step else "before its first step"
        super().__init__(
            f"{image}: build failed at {where} (buildah exit {exit_code}); last output:\n  "
            + "\n  ".join(tail)
        )
        self.image = image
        self.step = step
        self.exit_code = exit_code


@dataclass(frozen=True)
class Buildah:
    """One private containers-storage (vfs) under `root`, state under `runroot`."""

    root: Path
    runroot: Path

    def _argv(self, *args: str) -> list[str]:
        return [
            "buildah",
            "--root",
            str(self.root),
            "--runroot",
            str(self.runroot),
            "--storage-driver",
            "vfs",
            *args,
        ]

    def _policy(self) -> Path:
        path = self.root.parent / "policy.json"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(_POLICY))
        return path

    def check_host(self) -> None:
        require_tools({"buildah": "buildah"})

    def has_image(self, ref: str) -> bool:
        proc = subprocess.run(
            self._argv("inspect", "--type", "image", ref), capture_output=True, check=False
        )
        return proc.returncode == 0

    def load_archive(self, archive: Path) -> None:
        """Bring an image saved by `save_archive` back into storage (to build FROM it)."""
        self._run(
            "pull",
            "--quiet",
            "--signature-policy",
            str(self._policy()),
            f"docker-archive:{archive}",
        )

    def save_archive(self, ref: str, archive: Path) -> None:
        """Write `ref` as a docker-archive that keeps its name (what `ctr images import` reads)."""
        partial = archive.with_name(archive.name + ".partial")
        partial.unlink(missing_ok=True)
        self._run(
            "push",
            "--quiet",
            "--signature-policy",
            str(self._policy()),
            ref,
            f"docker-archive:{partial}:{ref}",
        )
        partial.replace(archive)

    def images(self) -> list[str]:
        """`repository:tag` of every image in this storage."""
        out = subprocess.run(
            self._argv("images", "--format", "{{.Name}}:{{.Tag}}"),
            capture_output=True,
            text=True,
            check=False,
        )
        return out.stdout.split() if out.returncode == 0 else []

    def remove_image(self, ref: str) -> None:
        subprocess.run(self._argv("rmi", "--force", ref), capture_output=True, check=False)

    def build(
        self,
        *,
        image: str,
        containerfile: Path,
        context: Path,
        tag: str,
        build_args: Mapping[str, str],
        progress: Progress,
    ) -> None:
        """Build `containerfile` in `context` as `tag`; raise BuildError naming the failing step."""
        argv = self._argv(
            "bud",
            "--isolation",
            "chroot",
            "--pull-never",
            "--signature-policy",
            str(self._policy()),
            "--layers=false",
            "--format",
            "docker",
            "-f",
            str(containerfile),
            "-t",
            tag,
        )
        for name, value in sorted(build_args.items()):
            argv += ["--build-arg", f"{name}={value}"]
        argv.append(str(context))
        step: str | None = None
        tail: list[str] = []
        with subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        ) as proc:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.rstrip()
                match = _STEP.match(line)
                if match:
                    step = f"{match[1]}/{match[2]} `{match[3]}`"
                    progress.say(image, f"step {match[1]}/{match[2]}: {match[3]}")
                    tail = []
                else:
                    progress.detail(image, line)
                    tail = [*tail[-24:], line]
        if proc.returncode != 0:
            raise BuildError(image, step, proc.returncode, tail)

    def _run(self, *args: str) -> str:
        proc = subprocess.run(self._argv(*args), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"buildah {args[0]} failed: {proc.stderr.strip()}")
        return proc.stdout
