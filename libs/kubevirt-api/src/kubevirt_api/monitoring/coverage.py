"""How much of upstream's metric list a component serves: present (same name and type),
wrong type, and absent."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .catalogue import upstream_metrics_of

__all__ = ["Coverage", "coverage_of"]


@dataclass(frozen=True)
class Coverage:
    """A component's metrics against upstream's: names sorted."""

    component: str
    present: tuple[str, ...]
    wrong_type: tuple[str, ...]  # "name: ours, upstream's"
    absent: tuple[str, ...]
    extra: tuple[str, ...]  # ours only (kubevirt-py's own)

    def report(self) -> str:
        """The lines the coverage test prints."""
        total = len(self.present) + len(self.wrong_type) + len(self.absent)
        lines = [f"{self.component}: {len(self.present)} of {total} upstream metrics present"]
        lines += [f"  present  {name}" for name in self.present]
        lines += [f"  WRONG    {entry}" for entry in self.wrong_type]
        lines += [f"  absent   {name}" for name in self.absent]
        lines += [f"  ours     {name}" for name in self.extra]
        return "\n".join(lines)


def coverage_of(component: str, declared: Iterable[tuple[str, str]]) -> Coverage:
    """Compare ``declared`` (name, kind) pairs with what ``component`` serves upstream."""
    ours = dict(declared)
    upstream = {m.name: m.kind for m in upstream_metrics_of(component)}
    present = sorted(n for n, kind in upstream.items() if ours.get(n) == kind)
    wrong = sorted(
        f"{n}: {ours[n]}, upstream {kind}"
        for n, kind in upstream.items()
        if n in ours and ours[n] != kind
    )
    absent = sorted(n for n in upstream if n not in ours)
    extra = sorted(n for n in ours if n not in upstream)
    return Coverage(component, tuple(present), tuple(wrong), tuple(absent), tuple(extra))
