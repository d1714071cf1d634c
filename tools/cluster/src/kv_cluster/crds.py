"""Install the project's CustomResourceDefinitions (manifests/crds/*.yaml) with kubectl."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

from kv_cluster.config import ConfigError
from kv_cluster.kubectl import Kubectl
from kv_cluster.plan import APISERVER, KUBEVIRT_CRDS

__all__ = ["CrdsError", "KubevirtCrds", "crd_files", "crds_dir", "install_crds"]

_FIELD_MANAGER = "kv-cluster"


def crds_dir(env: Mapping[str, str] | None = None, start: Path | None = None) -> Path | None:
    """$KV_CLUSTER_CRDS_DIR, else `manifests/crds` of the repository containing `start`
    (default: the working directory), else of the repository this package lives in."""
    env = os.environ if env is None else env
    if env.get("KV_CLUSTER_CRDS_DIR"):
        chosen = Path(env["KV_CLUSTER_CRDS_DIR"])
        if ".." in chosen.parts:
            raise ConfigError(f"KV_CLUSTER_CRDS_DIR must not contain '..': {chosen}")
        return chosen
    candidates = [start or Path.cwd(), Path(__file__).resolve()]
    for origin in candidates:
        for directory in (origin, *origin.parents):
            if (directory / "manifests" / "crds").is_dir() and (
                directory / "pyproject.toml"
            ).is_file():
                return directory / "manifests" / "crds"
    return None


def crd_files(directory: Path | None) -> list[Path]:
    """The YAML files to apply, sorted; empty when the dir is missing or holds none yet.

    kustomization.yaml is kustomize's index of the same files, not a resource: skipped.
    """
    if directory is None or not directory.is_dir():
        return []
    return sorted(
        p
        for p in directory.iterdir()
        if p.suffix in (".yaml", ".yml") and p.is_file() and p.stem != "kustomization"
    )


def install_crds(kubectl: Kubectl, files: list[Path]) -> list[str]:
    """Server-side apply `files` and wait until every CRD is Established; returns CRD names.

    Server-side apply: KubeVirt's CRDs exceed the 256 KiB last-applied annotation that a
    client-side apply would store.
    """
    if not files:
        return []
    out = kubectl.run(
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={_FIELD_MANAGER}",
        *(arg for path in files for arg in ("-f", str(path))),
        "-o",
        "name",
    )
    names = [n for n in out.stdout.split() if n.startswith("customresourcedefinition")]
    wait_established(kubectl, names)
    return names


def wait_established(kubectl: Kubectl, names: list[str], timeout: float = 60.0) -> None:
    """Wait until every CRD in `names` has condition Established=True.

    Not `kubectl wait --for=condition=Established`: right after a create the CRD has no
    `status.conditions` yet and kubectl fails at once ("accessor error: <nil> is of the
    type <nil>") instead of waiting; seen on a fresh machine's first `up`.
    """
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        found = kubectl.run("get", *pending, "-o", "json", check=False)
        if found.returncode == 0:
            body = json.loads(found.stdout)
            items = body.get("items", [body])
            established = {
                f"customresourcedefinition.apiextensions.k8s.io/{i['metadata']['name']}"
                for i in items
                if any(
                    c.get("type") == "Established" and c.get("status") == "True"
                    for c in (i.get("status") or {}).get("conditions") or []
                )
            }
            pending = [n for n in pending if n not in established]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise CrdsError(f"CRDs not Established within {timeout:.0f}s: {', '.join(pending)}")
        time.sleep(0.2)


class CrdsError(RuntimeError):
    """The CRDs cannot be applied (none found, or kubectl refused them)."""


class KubevirtCrds:
    """The step of `up` that applies manifests/crds and waits until they are Established."""

    name = "crds"
    requires = frozenset({APISERVER})
    provides = frozenset({KUBEVIRT_CRDS})

    def __init__(self, kubectl: Kubectl, directory: Path | None) -> None:
        self.kubectl = kubectl
        self.directory = directory
        self.applied: list[str] = []

    def ensure(self) -> str:
        files = crd_files(self.directory)
        if not files:
            raise CrdsError(
                f"no CRDs to install: no *.yaml in {self.directory or 'manifests/crds'} "
                "(`uv run python -m kubevirt_api.crds` writes them)"
            )
        self.applied = install_crds(self.kubectl, files)
        return f"{len(self.applied)} applied from {self.directory}"
