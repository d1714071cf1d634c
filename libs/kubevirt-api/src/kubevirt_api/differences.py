"""Every deliberate difference between our API library and upstream's swagger.json / CRDs.

This is the one place that lists them; ``tests/test_swagger_fields.py`` fails on any
difference not listed here and on any entry here that no longer occurs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["CRD_DIFFERENCES", "DEFAULTING_DIFFERENCES", "FIELD_DIFFERENCES", "TYPE_DIFFERENCES"]

# (swagger type, our type) -> why. Types are written as the comparison test spells them.
TYPE_DIFFERENCES: Final[Mapping[tuple[str, str], str]] = {
    ("string", "enum"): (
        "closed value sets swagger.json does not list, taken from upstream's Go constants, "
        "admission rules and CRD markers (codegen.ENUM_FIELDS, codegen.CRD_ENUM_FIELDS); "
        "a bad value is refused with the list of valid ones"
    ),
    ("integer", "integer>=0"): (
        "counts that cannot be negative (unsigned in upstream's Go types or refused by its "
        "admission rules): replicas, cores, sockets, threads, probe timings, ..."
    ),
    ("integer", "integer>=1"): "bootOrder starts at 1, as upstream's admission requires",
    ("integer", "integer bounded"): (
        "minimum/maximum that upstream's CRDs carry from kubebuilder markers "
        "(codegen._BOUNDS); maxItems and string lengths from there are enforced too"
    ),
    ("quantity", "quantity>=0"): "sizes and CPU amounts cannot be negative",
    ("string(date-time)", "string"): (
        "timestamps stay the RFC 3339 string they were written as (not parsed), so they "
        "round-trip unchanged"
    ),
    ("null|string", "string"): (
        "an explicit null is kept in the object's extra mapping and dumped back as null"
    ),
}

# "<swagger definition>.<property>" -> why.
FIELD_DIFFERENCES: Final[Mapping[str, str]] = {
    "k8s.io.api.core.v1.HTTPGetAction.port": (
        "swagger says string-or-number; Kubernetes' type is IntOrString, and so is ours"
    ),
    "k8s.io.api.core.v1.TCPSocketAction.port": (
        "swagger says string-or-number; Kubernetes' type is IntOrString, and so is ours"
    ),
}

# Differences of the generated CRDs from upstream's (checked by hand against upstream's
# generated validation schemas at the vendored commit; see README).
CRD_DIFFERENCES: Final[tuple[str, ...]] = (
    "no integer formats (int32/int64): swagger.json and upstream's CRDs disagree on them",
    "the messages of the two CEL rules on containerPath volumes are our own words",
    "deprecation warnings are our own words",
    "printer column descriptions are our own words",
)

# Differences of kubevirt_api.defaults from upstream's create-time defaulting.
DEFAULTING_DIFFERENCES: Final[tuple[str, ...]] = (
    "the default pod interface is masquerade (upstream's built-in default is bridge); "
    "network.defaultNetworkInterface in the KubeVirt CR still chooses",
    "the default VM rollout strategy is Stage (upstream: LiveUpdate), so maxSockets and "
    "maxGuest are only set when the KubeVirt CR asks for LiveUpdate",
    "not done here: presets, instancetype/preference expansion, the architecture "
    "lookup through CDI DataSources, s390x specifics, and the webhook-only parts "
    "(finalizer, phase Pending, non-root and PCI topology annotations)",
)
