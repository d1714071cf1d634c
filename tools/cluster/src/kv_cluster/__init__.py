"""Builds and runs a real local Kubernetes cluster for kubevirt-py."""

__all__: list[str] = []
