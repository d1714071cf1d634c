"""virt-operator: installs kubevirt-py as the KubeVirt CR describes, keeps it so, removes it.

The install strategy (`strategy.render`) is the one source of what gets installed: the
operator applies it, and `virt_operator.release` writes `manifests/release/` from the same
components.
"""

__all__: list[str] = []
