"""Guest memory and its backing (hugepages)."""

from __future__ import annotations

from ..errors import ConversionError
from ..schema import Domain, HugePage, HugePages, Memory, MemoryBacking
from .context import Context

__all__ = ["configure"]

_PAGE_SIZES_KIB = {"2Mi": 2048, "1Gi": 1048576}


def configure(ctx: Context, domain: Domain) -> None:
    """``<memory>`` and ``<currentMemory>`` (bytes) from the guest size; hugepages."""
    size = ctx.guest_memory
    domain.memory = Memory(unit="b", value=size)
    # Stated, not left to libvirt: the balloon starts from the full guest size.
    domain.current_memory = Memory(unit="b", value=size)
    source = ctx.domain_spec.memory
    if source is not None and source.max_guest is not None:
        maximum = int(source.max_guest.value)
        if maximum != size:
            raise ConversionError(
                "spec.domain.memory.maxGuest",
                "memory hotplug is not supported; leave maxGuest unset or equal to guest",
            )
    if source is None or source.hugepages is None:
        return
    page = source.hugepages.page_size or ""
    kib = _PAGE_SIZES_KIB.get(page)
    if kib is None:
        raise ConversionError(
            "spec.domain.memory.hugepages.pageSize",
            f"unsupported page size {page!r}; valid: {', '.join(_PAGE_SIZES_KIB)}",
        )
    if size % (kib * 1024):
        raise ConversionError(
            "spec.domain.memory.guest",
            f"guest memory ({size} bytes) must be a multiple of the {page} page size",
        )
    domain.memory_backing = MemoryBacking(
        hugepages=HugePages(pages=[HugePage(size=str(kib), unit="KiB")])
    )
