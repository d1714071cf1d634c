"""Typed models of every kubevirt.io kind and the types they contain."""

from kubevirt_api.models.generated import *  # noqa: F403
from kubevirt_api.models.generated import __all__ as __all__
