"""Typed models, schemas, defaulting and admission rules for kubevirt.io/v1 and its sibling groups."""

__all__: list[str] = []
