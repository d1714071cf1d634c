"""Regenerate the committed protocol code from proto/, or check that it is current.

Run from the repository: ``uv run python -m virt_rpc.regenerate`` rewrites
``libs/virt-rpc/src/virt_rpc/generated/``; ``--check`` only reports staleness
(exit 1). The generators (grpcio-tools, betterproto2-compiler) are dev
dependencies, so this module runs them as a subprocess and never imports them.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "GENERATED_DIR",
    "PROTO_FILES",
    "StaleGeneratedCodeError",
    "check",
    "find_proto_root",
    "generate",
    "main",
    "regenerate",
]

GENERATED_DIR = Path(__file__).resolve().parent / "generated"

# Relative to the proto root; one entry per .proto file we own.
PROTO_FILES: tuple[str, ...] = (
    "kubevirtpy/launcher/handshake/handshake.proto",
    "kubevirtpy/launcher/v1/launcher.proto",
)

_OPTIONS = "client_generation=async,server_generation=async"


class StaleGeneratedCodeError(Exception):
    """The committed generated code differs from what proto/ generates."""

    def __init__(self, differences: Sequence[str]) -> None:
        self.differences = list(differences)
        super().__init__(
            "generated protocol code is stale (run `uv run python -m virt_rpc.regenerate`): "
            + ", ".join(self.differences)
        )


def find_proto_root(start: Path | None = None) -> Path:
    """Return the repository's ``proto/`` directory, searching upwards from ``start``.

    Raises FileNotFoundError when this module does not sit in a source checkout.
    """
    here = (start or Path(__file__)).resolve()
    for parent in [here, *here.parents]:
        candidate = parent / "proto"
        if (candidate / PROTO_FILES[0]).is_file():
            return candidate
    raise FileNotFoundError(f"no proto/ directory with {PROTO_FILES[0]} above {here}")


def generate(out_dir: Path, proto_root: Path | None = None) -> None:
    """Run protoc with the betterproto2 plugin, writing a package tree into ``out_dir``."""
    root = proto_root or find_proto_root()
    out_dir.mkdir(parents=True, exist_ok=True)
    # protoc finds its plugin, and the plugin finds ruff, through PATH: the venv's bin
    # comes first so the versions pinned in uv.lock are used.
    bin_dir = str(Path(sys.executable).parent)

    env = dict(os.environ)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    cmd = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{root}",
        f"--python_betterproto2_out={out_dir}",
        f"--python_betterproto2_opt={_OPTIONS}",
        *(str(root / name) for name in PROTO_FILES),
    ]
    # The plugin formats its output with the `ruff` on PATH, which reads the ruff settings
    # of its working directory: run from the repository root so output never depends on
    # where this was started.
    result = subprocess.run(
        cmd, env=env, cwd=find_proto_root().parent, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"protoc failed ({result.returncode}): {result.stderr.strip()}")
    for path in sorted(out_dir.rglob("*.py")):
        path.write_text(_defer_dateutil(path.read_text(), path.name))


# betterproto2's Timestamp imports dateutil (≈ 2 MiB in every process, a launcher per VM)
# for one use: parsing a JSON string in from_dict. Our wire is binary protobuf, so the
# import waits for that call.
_DATEUTIL_IMPORT = "import dateutil.parser\n"
_DATEUTIL_USE = "            dt = dateutil.parser.isoparse(value)\n"
_DATEUTIL_DEFERRED = (
    "            import dateutil.parser  # deferred by virt_rpc.regenerate\n\n" + _DATEUTIL_USE
)


def _defer_dateutil(source: str, name: str) -> str:
    """``source`` with its module-level dateutil import moved into the one call that uses it.

    Raises RuntimeError when the generator's output no longer has the expected shape, so a
    betterproto2 upgrade that changes it is seen here, not as a slower launcher.
    """
    if _DATEUTIL_IMPORT not in source:
        return source
    if source.count(_DATEUTIL_IMPORT) != 1 or source.count(_DATEUTIL_USE) != 1:
        raise RuntimeError(f"{name}: dateutil is used in a way virt_rpc.regenerate cannot defer")
    return source.replace(_DATEUTIL_IMPORT, "").replace(_DATEUTIL_USE, _DATEUTIL_DEFERRED)


def _differences(expected: Path, actual: Path) -> list[str]:
    """Relative paths that are missing, extra, or differ between two trees."""
    out: list[str] = []
    want = {p.relative_to(expected) for p in expected.rglob("*") if p.is_file()}
    have = {
        p.relative_to(actual)
        for p in actual.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    out += [f"missing {p}" for p in sorted(want - have)]
    out += [f"unexpected {p}" for p in sorted(have - want)]
    out += [
        f"differs {p}"
        for p in sorted(want & have)
        if not filecmp.cmp(expected / p, actual / p, shallow=False)
    ]
    return out


def check(generated_dir: Path = GENERATED_DIR, proto_root: Path | None = None) -> None:
    """Raise StaleGeneratedCodeError unless ``generated_dir`` equals a fresh generation."""
    with tempfile.TemporaryDirectory(prefix="virt-rpc-") as tmp:
        fresh = Path(tmp) / "generated"
        generate(fresh, proto_root)
        differences = _differences(fresh, generated_dir)
    if differences:
        raise StaleGeneratedCodeError(differences)


def regenerate(generated_dir: Path = GENERATED_DIR, proto_root: Path | None = None) -> None:
    """Replace ``generated_dir`` with a fresh generation (all or nothing)."""
    with tempfile.TemporaryDirectory(prefix="virt-rpc-", dir=generated_dir.parent) as tmp:
        fresh = Path(tmp) / "generated"
        generate(fresh, proto_root)
        old = Path(tmp) / "old"
        if generated_dir.exists():
            generated_dir.rename(old)
        fresh.rename(generated_dir)
        shutil.rmtree(old, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m virt_rpc.regenerate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only report staleness")
    args = parser.parse_args(argv)
    try:
        if args.check:
            check()
            print("generated protocol code is up to date")
        else:
            regenerate()
            print(f"regenerated {GENERATED_DIR}")
    except StaleGeneratedCodeError as exc:
        print(exc, file=sys.stderr)
        return 1
    except (FileNotFoundError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
