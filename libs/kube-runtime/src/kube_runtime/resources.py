"""Group/version/resource coordinates: the built-in kinds, and KubeVirt's from kubevirt_api.

:class:`Resource` and KubeVirt's kinds are defined once, in ``kubevirt_api.resources``;
this module re-exports the two the runtime's users watch most beside the built-in kinds
(the others: import them from ``kubevirt_api.resources``).
"""

from __future__ import annotations

from kubevirt_api.resources import (
    CONTROLLER_REVISIONS,
    VIRTUAL_MACHINE_INSTANCES,
    VIRTUAL_MACHINES,
    Resource,
)

__all__ = [
    "CONFIGMAPS",
    "CONTROLLER_REVISIONS",
    "DATA_VOLUMES",
    "EVENTS",
    "LEASES",
    "NODES",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "SECRETS",
    "SERVICES",
    "SUBJECT_ACCESS_REVIEWS",
    "VIRTUAL_MACHINES",
    "VIRTUAL_MACHINE_INSTANCES",
    "Resource",
]


CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
PODS = Resource("", "v1", "pods", "Pod")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
SERVICES = Resource("", "v1", "services", "Service")
SECRETS = Resource("", "v1", "secrets", "Secret")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
# CDI's, which KubeVirt's dataVolumeTemplates make (absent from a cluster without CDI).
DATA_VOLUMES = Resource("cdi.kubevirt.io", "v1beta1", "datavolumes", "DataVolume")
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
