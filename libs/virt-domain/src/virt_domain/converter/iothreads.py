"""IOThreads: how many, and which one each virtio disk uses.

Like KubeVirt: a disk with ``dedicatedIOThread`` gets its own thread; the others share
a pool sized by ``ioThreadsPolicy`` (``shared``/unset: one thread; ``auto``: two per
requested CPU); ``supplementalPool`` gives every virtio disk all pool threads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConversionError
from ..schema import Domain, IOThreads
from .context import Context

__all__ = ["IOThreadPlan", "configure", "plan"]


@dataclass(frozen=True, slots=True)
class IOThreadPlan:
    """Thread ids: auto pool ``1..auto``, dedicated threads after it."""

    total: int
    auto: int
    supplemental: bool = False


def plan(ctx: Context) -> IOThreadPlan | None:
    """The VMI's IOThread plan, or None when it uses none."""
    spec = ctx.domain_spec
    disks = ctx.devices.disks or ()
    policy = str(spec.io_threads_policy) if spec.io_threads_policy else None
    if policy is None and not any(d.dedicated_io_thread for d in disks):
        return None
    if policy == "supplementalPool":
        count = spec.io_threads.supplemental_pool_thread_count if spec.io_threads else None
        if not count or count < 1:
            raise ConversionError(
                "spec.domain.ioThreads.supplementalPoolThreadCount",
                "required and at least 1 with ioThreadsPolicy supplementalPool",
            )
        return IOThreadPlan(total=count, auto=0, supplemental=True)
    dedicated = sum(1 for d in disks if d.dedicated_io_thread)
    auto = len(disks) - dedicated
    if policy in (None, "shared"):
        limit = 1
    elif policy == "auto":
        limit = 2 * ctx.topology.vcpus
    else:
        raise ConversionError(
            "spec.domain.ioThreadsPolicy",
            f"unknown policy {policy!r}; valid: shared, auto, supplementalPool",
        )
    if auto + dedicated > limit:
        auto = max(1, limit - dedicated)
    return IOThreadPlan(total=auto + dedicated, auto=auto)


def configure(ctx: Context, domain: Domain) -> None:
    """``<iothreads>N</iothreads>`` when the plan has threads."""
    found = plan(ctx)
    if found is not None and found.total > 0:
        domain.iothreads = IOThreads(count=found.total)
