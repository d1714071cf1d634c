"""Calling subresources.kubevirt.io with the kubeconfig's context and namespace.

Shared by the lifecycle commands (start, stop, ...). Errors become `SubresourceError`
with the API server's own message, which the commands print as one line.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import tempfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

__all__ = [
    "GROUP_PATH",
    "Cluster",
    "SubresourceError",
    "add_cluster_flags",
    "call",
    "cluster_from_args",
    "dry_run_body",
]

GROUP_PATH = "/apis/subresources.kubevirt.io/v1"


class SubresourceError(Exception):
    """A call failed; the message is fit for the user (no traceback)."""


@dataclass(frozen=True, slots=True)
class Cluster:
    """Where to send requests and as whom, from one kubeconfig context."""

    server: str
    namespace: str
    ssl_context: ssl.SSLContext
    token: str | None = None


def add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig, --context, -n/--namespace, as kubectl has them."""
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    parser.add_argument(
        "--context", help="kubeconfig context to use (default: its current-context)"
    )
    parser.add_argument(
        "-n", "--namespace", help="namespace (default: the context's namespace, else default)"
    )


def dry_run_body(args: argparse.Namespace) -> dict[str, Any]:
    """The `dryRun` field the subresource bodies share."""
    return {"dryRun": ["All"]} if getattr(args, "dry_run", False) else {}


def _kubeconfig_path(args: argparse.Namespace) -> Path:
    if args.kubeconfig:
        return Path(args.kubeconfig)
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0])
    return Path.home() / ".kube" / "config"


def cluster_from_args(args: argparse.Namespace) -> Cluster:
    """Read the kubeconfig the way kubectl does (first file of $KUBECONFIG only)."""
    path = _kubeconfig_path(args)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise SubresourceError(f"cannot read kubeconfig {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise SubresourceError(f"kubeconfig {path} is not UTF-8 text") from None
    except yaml.YAMLError as error:
        raise SubresourceError(f"kubeconfig {path} is not YAML: {error}") from None
    if not isinstance(config, Mapping):
        raise SubresourceError(f"kubeconfig {path} is not a kubeconfig")
    name = args.context or config.get("current-context")
    if not name:
        raise SubresourceError(f"kubeconfig {path} has no current-context; pass --context")

    def pick(section: str, wanted: object) -> Mapping[str, Any]:
        for entry in config.get(section) or []:
            if isinstance(entry, Mapping) and entry.get("name") == wanted:
                body = entry.get(section[:-1])
                if isinstance(body, Mapping):
                    return body
        raise SubresourceError(f"kubeconfig {path} has no {section[:-1]} named {wanted!r}")

    context = pick("contexts", name)
    cluster = pick("clusters", context.get("cluster"))
    user = pick("users", context.get("user"))
    base = path.resolve().parent

    def material(
        file_key: str, data_key: str, body: Mapping[str, Any], scratch: Path
    ) -> str | None:
        if body.get(data_key):
            try:
                data = base64.b64decode(str(body[data_key]))
            except ValueError:
                raise SubresourceError(
                    f"kubeconfig {path}: {data_key} of context {name!r} is not base64"
                ) from None
            target = scratch / data_key
            target.write_bytes(data)
            return str(target)
        if body.get(file_key):
            return str(base / str(body[file_key]))
        return None

    with tempfile.TemporaryDirectory(prefix="virtctl-") as scratch_dir:
        scratch = Path(scratch_dir)
        # A missing file or a PEM that does not parse is the kubeconfig's fault, not ours:
        # say which field, never "internal error".
        field = "certificate-authority"
        try:
            context_ssl = ssl.create_default_context(
                cafile=material(field, f"{field}-data", cluster, scratch)
            )
            if cluster.get("insecure-skip-tls-verify"):
                context_ssl.check_hostname = False
                context_ssl.verify_mode = ssl.CERT_NONE
            field = "client-certificate/client-key"
            cert = material("client-certificate", "client-certificate-data", user, scratch)
            key = material("client-key", "client-key-data", user, scratch)
            if cert and key:
                context_ssl.load_cert_chain(cert, key)
        except OSError as error:  # ssl.SSLError is an OSError
            reason = error.strerror or str(error)
            raise SubresourceError(
                f"kubeconfig {path}: {field} of context {name!r} is unusable: {reason}"
            ) from None
    namespace = args.namespace or context.get("namespace") or "default"
    server = str(cluster.get("server") or "").rstrip("/")
    if not server.startswith("https://"):
        raise SubresourceError(f"cluster server {server!r} must be an https:// URL")
    token = user.get("token")
    return Cluster(server, str(namespace), context_ssl, str(token) if token else None)


def call(
    cluster: Cluster,
    method: str,
    resource: str,
    name: str,
    action: str,
    body: Mapping[str, Any] | None = None,
) -> Any:
    """Call one subresource; return its decoded JSON answer (None when empty)."""
    tail = f"{resource}/{quote(name, safe='')}/{action}" if resource else action
    path = f"{GROUP_PATH}/namespaces/{quote(cluster.namespace, safe='')}/{tail}"
    data = json.dumps(dict(body)).encode() if body is not None else None
    request = urllib.request.Request(cluster.server + path, data=data, method=method)
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if cluster.token:
        request.add_header("Authorization", f"Bearer {cluster.token}")
    try:
        with urllib.request.urlopen(request, context=cluster.ssl_context, timeout=30) as response:
            raw = response.read()
    except urllib.error.HTTPError as error:
        raise SubresourceError(_status_message(error)) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise SubresourceError(f"cannot reach the cluster at {cluster.server}: {reason}") from None
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise SubresourceError("the server's answer is not JSON") from None


def _status_message(error: urllib.error.HTTPError) -> str:
    raw = error.read()
    try:
        status = json.loads(raw)
    except ValueError:
        status = None
    if isinstance(status, Mapping) and status.get("message"):
        return f"{status['message']} ({error.code} {status.get('reason') or error.reason})"
    text = raw.decode(errors="replace").strip()[:300]
    return f"{error.code} {error.reason}" + (f": {text}" if text else "")
