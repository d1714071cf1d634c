"""The libvirt domain model (object <-> XML) and the converter VMI -> domain. Pure, no I/O."""

__all__: list[str] = []
