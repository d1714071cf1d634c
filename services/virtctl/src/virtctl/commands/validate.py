"""`virtctl validate -f FILE...`: check manifests offline as the API server would.

Output: one line per problem, ``<file>: <Kind>/<name>: <field path>: <message>``;
exit 0 when every object is valid, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from kubevirt_api.admission import ClusterConfig

from virtctl.documents import Document, ReadError, read_documents
from virtctl.validation import is_kubevirt_object, validate

__all__ = ["object_label", "register", "run"]

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add ``validate`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "validate",
        help="validate KubeVirt manifests offline (schema and admission rules)",
        description=(
            "Validate manifests without a cluster: every object must fit the schema of "
            "its kind and pass the admission rules virt-api applies. Objects of other "
            "API groups are skipped."
        ),
    )
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="a manifest file, a directory of them, or - for stdin (repeatable)",
    )
    parser.add_argument(
        "-R", "--recursive", action="store_true", help="descend into subdirectories"
    )
    parser.add_argument(
        "--feature-gates",
        default="",
        metavar="GATE,...",
        help="feature gates enabled in the target cluster's KubeVirt CR",
    )
    parser.add_argument(
        "--kubevirt-cr",
        metavar="FILE",
        help="the target cluster's KubeVirt CR (feature gates, permitted host devices)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="print problems only, no summary"
    )
    parser.set_defaults(run=run)


def object_label(doc: Document) -> str:
    """``Kind/name`` of a document, with placeholders for what is missing."""
    data = doc.data
    if not isinstance(data, Mapping):
        return f"<document {doc.index}>"
    kind = data.get("kind")
    metadata = data.get("metadata")
    name: object = None
    if isinstance(metadata, Mapping):
        name = metadata.get("name") or (
            f"{metadata['generateName']}*"
            if isinstance(metadata.get("generateName"), str)
            else None
        )
    kind_text = kind if isinstance(kind, str) and kind else "<no kind>"
    name_text = name if isinstance(name, str) and name else f"<document {doc.index}, no name>"
    return f"{kind_text}/{name_text}"


def cluster_config(kubevirt_cr: str | None, feature_gates: str) -> ClusterConfig | str:
    """The admission settings from a KubeVirt CR file plus extra gates, or an error line."""
    config = ClusterConfig()
    if kubevirt_cr is not None:
        found: Mapping[str, Any] | None = None
        for item in read_documents([kubevirt_cr]):
            if isinstance(item, ReadError):
                return str(item)
            if isinstance(item.data, Mapping) and item.data.get("kind") == "KubeVirt":
                found = item.data
                break
        if found is None:
            return f"{kubevirt_cr}: no object of kind KubeVirt in it"
        config = ClusterConfig.from_kubevirt(found)
    gates = frozenset(g.strip() for g in feature_gates.split(",") if g.strip())
    return dataclasses.replace(config, feature_gates=config.feature_gates | gates)


def run(args: argparse.Namespace) -> int:
    """Validate every object of every source; print problems; return the exit code."""
    config = cluster_config(args.kubevirt_cr, args.feature_gates)
    if isinstance(config, str):
        print(f"virtctl validate: --kubevirt-cr: {config}", file=sys.stderr)
        return EXIT_USAGE
    checked = skipped = failed = 0
    for item in read_documents(args.filename, recursive=args.recursive):
        if isinstance(item, ReadError):
            print(item, flush=False)
            failed += 1
            continue
        if not is_kubevirt_object(item.data):
            skipped += 1
            continue
        checked += 1
        problems = validate(item.data, config)
        if problems:
            failed += 1
        label = object_label(item)
        for problem in problems:
            path = f"{problem.path}: " if problem.path else ""
            print(f"{item.source}: {label}: {path}{problem.message}")
    if not args.quiet:
        summary = f"{checked} object(s) checked, {failed} with problems"
        if skipped:
            summary += f", {skipped} of other API groups skipped"
        print(summary, file=sys.stderr)
    return EXIT_INVALID if failed else EXIT_VALID
