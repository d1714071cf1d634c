"""A service's wheelhouse: its workspace members built as wheels plus every pinned dependency.

The pins come from `uv export` (so from uv.lock); the wheels are fetched or built on the host
(pip wheel: PyPI, and sdists such as libvirt-python compiled against the host's Debian
libraries, which match the bookworm images). Inside the image build, pip installs from this
directory with --no-index.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from kv_images.digest import ContentKey, tree_digest
from kv_images.host import HostError, require_tools
from kv_images.progress import Progress

__all__ = ["Requirements", "build_wheelhouse", "export_requirements"]

PYTHON_VERSION = "3.11"


@dataclass(frozen=True)
class Requirements:
    """A service's closure: workspace member dirs (relative) and third-party pin lines."""

    package: str
    members: tuple[str, ...]
    pins: tuple[str, ...]

    def key(self, workspace: Path) -> str:
        key = ContentKey("wheelhouse/1").add("python", PYTHON_VERSION).add("package", self.package)
        key.add_all("pin", self.pins)
        for member in self.members:
            key.add("member", member)
            key.add("pyproject", (workspace / member / "pyproject.toml").read_bytes())
            key.add("src", tree_digest(workspace / member / "src"))
        return key.hexdigest()


def export_requirements(workspace: Path, package: str) -> Requirements:
    """Ask uv (from uv.lock, never re-resolving) for `package`'s runtime closure."""
    require_tools({"uv": "uv (pip install uv)"})
    proc = subprocess.run(
        [
            "uv",
            "export",
            "--frozen",
            "--no-dev",
            "--package",
            package,
            "--no-hashes",
            "--no-header",
            "--no-annotate",
            "--format",
            "requirements-txt",
        ],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise HostError(f"uv export for {package} failed: {proc.stderr.strip()}")
    members: list[str] = []
    pins: list[str] = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        path = line.removeprefix("-e").strip()
        if path.startswith("./"):
            members.append(path.removeprefix("./"))
        else:
            pins.append(line)
    return Requirements(package, tuple(sorted(members)), tuple(sorted(pins)))


def _member_pin(workspace: Path, member: str) -> str:
    with (workspace / member / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    return f"{project['name']}=={project['version']}"


def build_wheelhouse(
    workspace: Path, requirements: Requirements, out: Path, progress: Progress
) -> None:
    """Fill `out` (created atomically) with the wheels and a requirements.txt naming them all."""
    require_tools({"uv": "uv (pip install uv)", "gcc": "gcc", "pkg-config": "pkg-config"})
    out.parent.mkdir(parents=True, exist_ok=True)
    subject = requirements.package
    with tempfile.TemporaryDirectory(prefix="kv-wheels-", dir=out.parent) as tmp:
        stage = Path(tmp) / "wheels"
        stage.mkdir()
        with progress.step(subject, f"building {len(requirements.members)} workspace wheels"):
            for member in requirements.members:
                _run(
                    ["uv", "build", "--quiet", "--wheel", "--out-dir", str(stage), member],
                    workspace,
                    f"uv build {member}",
                )
        pins = Path(tmp) / "pins.txt"
        pins.write_text("".join(f"{pin}\n" for pin in requirements.pins))
        with progress.step(
            subject, f"fetching/building {len(requirements.pins)} dependency wheels"
        ):
            _run(
                [
                    "uv",
                    "tool",
                    "run",
                    "--quiet",
                    "--python",
                    PYTHON_VERSION,
                    "--from",
                    "pip>=24",
                    "pip",
                    "wheel",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--wheel-dir",
                    str(stage),
                    "--requirement",
                    str(pins),
                ],
                workspace,
                "pip wheel",
            )
        lines = [*requirements.pins, *(_member_pin(workspace, m) for m in requirements.members)]
        (stage / "requirements.txt").write_text("".join(f"{line}\n" for line in lines))
        if out.exists():
            shutil.rmtree(out)
        stage.replace(out)


def _run(argv: list[str], cwd: Path, what: str) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-20:]
        raise HostError(f"{what} failed (exit {proc.returncode}):\n  " + "\n  ".join(detail))
    if proc.stderr.strip():
        print(proc.stderr.strip(), file=sys.stderr)
