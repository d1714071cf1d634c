"""Typed decoding of cached objects through kubevirt_api models.

Informers cache raw (frozen) objects; a decoder built here turns one into a frozen
kubevirt_api dataclass when a handler or reconcile asks for it (`event.obj`,
`informer.get`). Decoding validates: a malformed object raises InvalidObjectError with
field paths, which a controller's reconcile turns into a retry with backoff.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kubevirt_api import Model, load

from .informers.store import RawObject, thaw

__all__ = ["model_decoder"]

M = TypeVar("M", bound=Model)


def model_decoder(model: type[M]) -> Callable[[RawObject], M]:
    """A `decode` for SharedInformer: raw cached object -> `model` (e.g. VirtualMachineInstance)."""

    def decode(raw: RawObject) -> M:
        return load(model, thaw(raw))

    decode.__name__ = f"decode_{model.__name__}"
    return decode
