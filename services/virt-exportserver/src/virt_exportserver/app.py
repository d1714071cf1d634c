"""virt-exportserver's process: the environment the controller set, TLS, the server."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubevirt_api import exports as ex
from service_kit import (
    ServiceRunner,
    TCPListener,
    TLSError,
    TLSFiles,
    configure_logging,
    run_service,
    server_context,
)

from .server import build_app
from .volumes import ConfigError, Volume, volumes_from_env

__all__ = ["Settings", "main", "settings_from_env"]

COMPONENT = "virt-exportserver"


@dataclass(frozen=True, slots=True)
class Settings:
    volumes: list[Volume]
    cert_file: Path
    key_file: Path
    token_file: Path
    port: int = ex.SERVER_PORT


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """The settings from the pod's environment; ConfigError names the variable."""
    files = {}
    for variable in ("CERT_FILE", "KEY_FILE", "TOKEN_FILE"):
        value = env.get(variable, "")
        if not value:
            raise ConfigError(f"{variable}: required")
        files[variable] = Path(value)
    port_text = env.get("EXPORT_PORT", str(ex.SERVER_PORT))
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"EXPORT_PORT: {port_text!r} is not a port number")
    return Settings(
        volumes_from_env(env),
        files["CERT_FILE"],
        files["KEY_FILE"],
        files["TOKEN_FILE"],
        int(port_text),
    )


def read_token(path: Path) -> str:
    """The token file's text without surrounding whitespace; ConfigError if empty."""
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"TOKEN_FILE: cannot read {path}: {exc.strerror}") from None
    if not token:
        raise ConfigError(f"TOKEN_FILE: {path} is empty")
    return token


def main() -> int:
    """Serve until SIGTERM: exit 0 then, 2 on a bad environment, 1 on a failure."""
    configure_logging(os.environ.get("LOG_LEVEL", "info"), component=COMPONENT)
    try:
        settings = settings_from_env(os.environ)
        # Read once at start: the exporter pod is replaced, not updated, when a token changes.
        token = read_token(settings.token_file)
        context = server_context(TLSFiles(cert=settings.cert_file, key=settings.key_file))
    except (ConfigError, TLSError) as exc:
        print(f"{COMPONENT}: {exc}", file=sys.stderr)
        return 2
    app = build_app(settings.volumes, lambda: token)
    return run_service(ServiceRunner(app, [TCPListener("0.0.0.0", settings.port, context)]))
