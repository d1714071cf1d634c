"""virt-exportserver: a VirtualMachineExport's volumes over HTTPS, for a token."""

from .app import Settings, main, settings_from_env
from .server import build_app
from .volumes import ConfigError, Volume, open_image, volumes_from_env

__all__ = [
    "ConfigError",
    "Settings",
    "Volume",
    "build_app",
    "main",
    "open_image",
    "settings_from_env",
    "volumes_from_env",
]
