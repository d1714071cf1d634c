"""Builds kubevirt-py container images without a daemon."""

__all__: list[str] = []
