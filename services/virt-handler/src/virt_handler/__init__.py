"""The node agent that drives each launcher."""

__all__: list[str] = []
