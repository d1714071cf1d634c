"""Per-VM launcher: libvirtd supervision, domain manager, Cmd server, Notify client."""

__all__: list[str] = []
