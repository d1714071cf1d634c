"""A directory of generated manifests: write it, or say which files are stale.

Shared by the generators of ``manifests/`` (the CRDs, the common instancetypes), so each
has the same ``--check`` and the same way of finding the repository.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["generator_main", "repo_root", "stale_files", "write_files"]


def stale_files(expected: Mapping[str, str], directory: Path) -> list[str]:
    """Files in ``directory`` that are missing, different, or no longer generated."""
    problems = [
        name
        for name, text in expected.items()
        if not (directory / name).is_file() or (directory / name).read_text() != text
    ]
    if directory.is_dir():
        problems += [p.name for p in directory.glob("*.yaml") if p.name not in expected]
    return sorted(problems)


def write_files(expected: Mapping[str, str], directory: Path) -> None:
    """Make ``directory`` hold exactly ``expected`` (stale *.yaml files are removed)."""
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.yaml"):
        if old.name not in expected:
            old.unlink()
    for name, text in expected.items():
        (directory / name).write_text(text)


def repo_root() -> Path:
    """The kubevirt-py checkout containing the working directory."""
    here = Path.cwd().resolve()
    for parent in [here, *here.parents]:
        if (parent / "manifests").is_dir() and (parent / "libs").is_dir():
            return parent
    raise FileNotFoundError("run from inside the kubevirt-py repository (no manifests/ found)")


def generator_main(
    argv: Sequence[str] | None,
    *,
    module: str,
    description: str | None,
    default_directory: Path,
    render: Callable[[], Mapping[str, str]],
    what: str,
) -> int:
    """``python -m <module> [--check] [--output DIR]``: write the files, or exit 1 naming
    the stale ones and the command that regenerates them."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    parser.add_argument(
        "--output", type=Path, help=f"directory (default: <repo>/{default_directory})"
    )
    args = parser.parse_args(argv)
    directory: Path = args.output or repo_root() / default_directory
    expected = render()
    if args.check:
        stale = stale_files(expected, directory)
        if stale:
            print(
                f"stale {what} in {directory}: {', '.join(stale)}; "
                f"run `uv run python -m {module}` and commit the result",
                file=sys.stderr,
            )
            return 1
        return 0
    write_files(expected, directory)
    print(f"wrote {len(expected)} files to {directory}")
    return 0
