"""The VM, VMI, replica set, migration and node controllers."""

__all__: list[str] = []
