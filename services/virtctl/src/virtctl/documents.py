"""Read manifests: files, directories and stdin, multi-document YAML or JSON.

Every problem reading or parsing becomes a :class:`ReadError` naming the source
(and line/column for YAML), never an exception escaping to the user.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import yaml

__all__ = ["STDIN", "Document", "ReadError", "expand_sources", "read_documents"]

STDIN = "-"
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Document:
    """One parsed YAML document: where it came from and its plain data."""

    source: str
    index: int  # 1-based position within its source
    data: object


@dataclass(frozen=True)
class ReadError:
    """A source that could not be read or parsed."""

    source: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


def expand_sources(
    names: Iterable[str], *, recursive: bool = False
) -> Iterator[Path | str | ReadError]:
    """Paths to read, in order: files as given, directories' manifests sorted by name.

    ``-`` stays ``-`` (stdin). A name that does not exist yields a ReadError.
    """
    for name in names:
        if name == STDIN:
            yield STDIN
            continue
        path = Path(name)
        if path.is_dir():
            pattern = "**/*" if recursive else "*"
            found = sorted(
                p for p in path.glob(pattern) if p.is_file() and p.suffix in _MANIFEST_SUFFIXES
            )
            if not found:
                yield ReadError(name, f"no {', '.join(_MANIFEST_SUFFIXES)} files in directory")
            yield from found
        elif path.exists():
            yield path
        else:
            yield ReadError(name, "no such file or directory")


class _ManifestLoader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings, as kubectl's YAML-to-JSON does."""


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return f"invalid YAML: {problem}"


def _parse(source: str, text: str) -> Iterator[Document | ReadError]:
    index = 0
    try:
        for data in yaml.load_all(text, Loader=_ManifestLoader):
            index += 1
            if data is None:  # an empty document (e.g. a trailing '---')
                continue
            yield Document(source, index, data)
    except yaml.YAMLError as exc:
        yield ReadError(source, _describe_yaml_error(exc))
    except RecursionError:
        yield ReadError(source, "invalid YAML: nested deeper than can be read")
    except ValueError as exc:
        # A constructor refusing a scalar, e.g. an integer longer than int() converts;
        # the part after ';' is advice about Python, not about the manifest.
        yield ReadError(source, f"invalid YAML: {str(exc).split(';')[0]}")


def read_documents(
    names: Iterable[str], *, recursive: bool = False, stdin: TextIO | None = None
) -> Iterator[Document | ReadError]:
    """Every document of every source, or a ReadError where a source cannot be read.

    Parsing stops at the first YAML error of a source; documents before it are kept.
    Each ``kind: List`` is expanded into its items.
    """
    for item in expand_sources(names, recursive=recursive):
        if isinstance(item, ReadError):
            yield item
            continue
        if item == STDIN:
            source = "<stdin>"
            try:
                text = (stdin or sys.stdin).read()
            except (OSError, UnicodeDecodeError) as exc:
                yield ReadError(source, f"cannot read: {exc}")
                continue
        else:
            source = str(item)
            try:
                text = Path(item).read_text(encoding="utf-8")
            except UnicodeDecodeError:
                yield ReadError(source, "not UTF-8 text")
                continue
            except OSError as exc:
                yield ReadError(source, f"cannot read: {exc.strerror or exc}")
                continue
        for parsed in _parse(source, text):
            if isinstance(parsed, Document) and _is_list(parsed.data):
                items = parsed.data.get("items") if isinstance(parsed.data, dict) else None
                for position, entry in enumerate(items or [], start=1):
                    yield Document(
                        f"{source}[{parsed.index}].items[{position - 1}]", position, entry
                    )
            else:
                yield parsed


def _is_list(data: object) -> bool:
    return (
        isinstance(data, dict)
        and data.get("kind") == "List"
        and data.get("apiVersion") == "v1"
        and isinstance(data.get("items"), list)
    )
