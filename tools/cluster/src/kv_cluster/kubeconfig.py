"""Kubeconfig files with the certificates embedded, so a copied file keeps working."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

from kv_cluster.pki import CertPaths

__all__ = ["write_kubeconfig"]


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def write_kubeconfig(
    path: Path, *, cluster: str, server: str, ca: Path, user: str, client: CertPaths
) -> Path:
    """Write (atomically, mode 0600) a kubeconfig for `user` talking to `server`."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(client.cert),
                    "client-key-data": _b64(client.key),
                },
            }
        ],
        "contexts": [{"name": f"{user}@{cluster}", "context": {"cluster": cluster, "user": user}}],
        "current-context": f"{user}@{cluster}",
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # It holds a client key; a .tmp left by an interrupted run keeps its old mode under
    # O_CREAT, so start afresh.
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(doc, out, sort_keys=False)
    tmp.replace(path)
    return path
