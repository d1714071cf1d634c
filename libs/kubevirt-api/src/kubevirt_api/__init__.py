"""Typed models, schemas, CRDs and defaulting for kubevirt.io/v1 and its sibling groups.

Load a plain dict (parsed YAML/JSON) with :func:`load` or :func:`load_object`, read
typed fields, dump back with :func:`dump`. Bad input raises :class:`InvalidObjectError`
whose ``errors`` are :class:`FieldError` (path, message) pairs.
"""

from kubevirt_api import defaults, enums, models, resources
from kubevirt_api.clusterconfig import ClusterConfig
from kubevirt_api.codec import dump, load, load_object, validate_object
from kubevirt_api.errors import FieldError, InvalidObjectError
from kubevirt_api.intorstring import IntOrString
from kubevirt_api.kinds import KINDS, KindInfo, kind_for, kind_of_model
from kubevirt_api.model import Model
from kubevirt_api.models import (
    KubeVirt,
    MigrationPolicy,
    VirtualMachine,
    VirtualMachineClusterInstancetype,
    VirtualMachineClusterPreference,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VirtualMachineInstancePreset,
    VirtualMachineInstanceReplicaSet,
    VirtualMachineInstancetype,
    VirtualMachinePool,
    VirtualMachinePreference,
)
from kubevirt_api.paths import image_path_problem
from kubevirt_api.quantity import Quantity, QuantityError
from kubevirt_api.resources import Resource
from kubevirt_api.runstrategy import resolve_run_strategy, run_strategy
from kubevirt_api.schemas import schema_for

__all__ = [
    "KINDS",
    "ClusterConfig",
    "FieldError",
    "IntOrString",
    "InvalidObjectError",
    "KindInfo",
    "KubeVirt",
    "MigrationPolicy",
    "Model",
    "Quantity",
    "QuantityError",
    "Resource",
    "VirtualMachine",
    "VirtualMachineClusterInstancetype",
    "VirtualMachineClusterPreference",
    "VirtualMachineInstance",
    "VirtualMachineInstanceMigration",
    "VirtualMachineInstancePreset",
    "VirtualMachineInstanceReplicaSet",
    "VirtualMachineInstancetype",
    "VirtualMachinePool",
    "VirtualMachinePreference",
    "defaults",
    "dump",
    "enums",
    "image_path_problem",
    "kind_for",
    "kind_of_model",
    "load",
    "load_object",
    "models",
    "resolve_run_strategy",
    "resources",
    "run_strategy",
    "schema_for",
    "validate_object",
]
