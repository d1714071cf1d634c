"""Why a set of informers is not ready yet, in words a readiness endpoint can answer with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .informer import SharedInformer

__all__ = ["sync_problems"]


def sync_problems(informers: Iterable[SharedInformer[Any]]) -> str:
    """ "" once every informer has synced; else one `name: why` part per informer that has
    not, `why` being its last list/watch error (e.g. the apiserver's 404 for a resource
    whose CRD is missing) or "not synced yet"."""
    parts = []
    for informer in informers:
        if informer.has_synced:
            continue
        error = informer.reflector.stats.last_error
        parts.append(f"{informer.name}: {f'not synced ({error})' if error else 'not synced yet'}")
    return "; ".join(parts)
