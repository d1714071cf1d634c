"""The VirtualMachineExport contract: names, URLs, the exporter pod's layout and its token.

One owner for what virt-controller (which renders the exporter pod and writes the links),
virt-exportserver (which serves the volumes) and virtctl (which downloads them) must agree
on. Values are upstream KubeVirt's unless a comment says otherwise.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = [
    "APP_VALUE",
    "BLOCK_MOUNT_ROOT",
    "CERT_ANNOTATION",
    "DEFAULT_TTL_SECONDS",
    "DISK_IMAGE",
    "FILESYSTEM_MOUNT_ROOT",
    "FORMAT_GZIP",
    "FORMAT_RAW",
    "GZIP_FILE",
    "RAW_FILE",
    "READINESS_PATH",
    "SERVER_PORT",
    "SERVICE_LABEL",
    "SERVICE_PORT",
    "TOKEN_HEADER",
    "TOKEN_KEY",
    "TOKEN_QUERY",
    "URL_BASE",
    "ServerFiles",
    "VolumeEnv",
    "cert_secret_name",
    "exporter_name",
    "internal_host",
    "pod_volume_name",
    "token_secret_name",
    "volume_env",
    "volume_url",
]

#: metadata.labels[kubevirt.io] of the exporter pod and Service.
APP_VALUE = "virt-exporter"
#: The label that ties the exporter pod to its Service (value: the export's name).
SERVICE_LABEL = "kubevirt.io.virt-export-service"
#: Ours: the exporter's self-signed certificate (PEM), so status needs no Secret read.
CERT_ANNOTATION = "export.kubevirt.io/certificate"

#: Service port 443 forwards to the server's 8443.
SERVICE_PORT = 443
SERVER_PORT = 8443
READINESS_PATH = "/exportready"

#: Where a Filesystem PVC is mounted (read-only) and a Block PVC appears, per volume.
FILESYSTEM_MOUNT_ROOT = "/export-volumes"
BLOCK_MOUNT_ROOT = "/dev/export-volumes"
#: The disk image inside a Filesystem PVC.
DISK_IMAGE = "disk.img"

URL_BASE = "/volumes"
RAW_FILE = "disk.img"
GZIP_FILE = "disk.img.gz"
FORMAT_RAW = "raw"
FORMAT_GZIP = "gzip"

#: The token: a header, or a query parameter of the same name.
TOKEN_HEADER = "x-kubevirt-export-token"
TOKEN_QUERY = TOKEN_HEADER
#: The generated token Secret's key.
TOKEN_KEY = "token"

#: spec.ttlDuration when unset: two hours.
DEFAULT_TTL_SECONDS = 2 * 3600.0

# DNS-1035 labels (Service names) are at most 63 characters.
_MAX_NAME = 63


def _bounded(prefix: str, name: str) -> str:
    """`prefix-name`, shortened with a stable hash suffix when over 63 characters."""
    full = f"{prefix}-{name}"
    if len(full) <= _MAX_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[: _MAX_NAME - 9]}-{digest}"


def exporter_name(export_name: str) -> str:
    """The exporter pod's and Service's name: `virt-export-<export>`."""
    return _bounded("virt-export", export_name)


def token_secret_name(export_name: str) -> str:
    """The generated token Secret: `export-token-<export>`."""
    return _bounded("export-token", export_name)


def cert_secret_name(export_name: str) -> str:
    """Ours: the exporter's TLS Secret (upstream names it `secret-<random>`)."""
    return _bounded("virt-export-cert", export_name)


def internal_host(export_name: str, namespace: str) -> str:
    """The Service's in-cluster DNS name: `virt-export-<export>.<ns>.svc`."""
    return f"{exporter_name(export_name)}.{namespace}.svc"


def pod_volume_name(claim: str) -> str:
    """A claim's directory under the mount roots (upstream's: dots become dashes)."""
    return claim.replace(".", "-")


def volume_url(host: str, claim: str, file: str) -> str:
    """`https://<host>/volumes/<claim>/<file>`."""
    return f"https://{host}{URL_BASE}/{claim}/{file}"


_VOLUME_ENV = re.compile(r"^VOLUME(\d+)_EXPORT_PATH$")


@dataclass(frozen=True, slots=True)
class VolumeEnv:
    """One exported volume as the exporter pod's environment describes it."""

    index: int
    #: Where it is mounted: a directory holding disk.img, or a block device.
    path: str
    #: URL paths: `/volumes/<claim>/disk.img` and `.../disk.img.gz`.
    raw_uri: str
    gzip_uri: str

    def env(self) -> list[dict[str, str]]:
        prefix = f"VOLUME{self.index}_EXPORT"
        return [
            {"name": f"{prefix}_PATH", "value": self.path},
            {"name": f"{prefix}_RAW_URI", "value": self.raw_uri},
            {"name": f"{prefix}_RAW_GZIP_URI", "value": self.gzip_uri},
        ]


def volume_env(index: int, claim: str, *, block: bool) -> VolumeEnv:
    """The environment of volume `index` (claim `claim`) in the exporter pod."""
    root = BLOCK_MOUNT_ROOT if block else FILESYSTEM_MOUNT_ROOT
    return VolumeEnv(
        index,
        f"{root}/{pod_volume_name(claim)}",
        f"{URL_BASE}/{claim}/{RAW_FILE}",
        f"{URL_BASE}/{claim}/{GZIP_FILE}",
    )


@dataclass(frozen=True, slots=True)
class ServerFiles:
    """Where the exporter pod mounts its certificate, key and token (env CERT_FILE, ...)."""

    cert_file: str = "/cert/tls.crt"
    key_file: str = "/cert/tls.key"
    token_file: str = "/token/token"

    def env(self) -> list[dict[str, str]]:
        return [
            {"name": "CERT_FILE", "value": self.cert_file},
            {"name": "KEY_FILE", "value": self.key_file},
            {"name": "TOKEN_FILE", "value": self.token_file},
        ]
