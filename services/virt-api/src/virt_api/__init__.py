"""Admission webhooks and the subresource API."""

__all__: list[str] = []
