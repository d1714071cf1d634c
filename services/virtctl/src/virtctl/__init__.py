"""The kubevirt-py command line."""

__all__: list[str] = []
