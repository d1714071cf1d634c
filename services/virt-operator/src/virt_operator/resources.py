"""REST coordinates of every kind the install strategy holds, by (apiVersion, kind)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube_runtime import CONFIGMAPS, SERVICES, Resource

__all__ = [
    "APISERVICES",
    "CLUSTER_ROLES",
    "CLUSTER_ROLE_BINDINGS",
    "CRDS",
    "DAEMONSETS",
    "DEPLOYMENTS",
    "MANAGED",
    "MUTATING_WEBHOOKS",
    "NAMESPACES",
    "ROLES",
    "ROLE_BINDINGS",
    "SECRETS",
    "SERVICE_ACCOUNTS",
    "VALIDATING_ADMISSION_POLICIES",
    "VALIDATING_ADMISSION_POLICY_BINDINGS",
    "VALIDATING_WEBHOOKS",
    "resource_for",
]

_RBAC = "rbac.authorization.k8s.io"
_ADMISSION = "admissionregistration.k8s.io"
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
SECRETS = Resource("", "v1", "secrets", "Secret")
CLUSTER_ROLES = Resource(_RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(
    _RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
ROLES = Resource(_RBAC, "v1", "roles", "Role")
ROLE_BINDINGS = Resource(_RBAC, "v1", "rolebindings", "RoleBinding")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
MUTATING_WEBHOOKS = Resource(
    _ADMISSION,
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_WEBHOOKS = Resource(
    _ADMISSION,
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_ADMISSION_POLICIES = Resource(
    _ADMISSION,
    "v1",
    "validatingadmissionpolicies",
    "ValidatingAdmissionPolicy",
    namespaced=False,
)
VALIDATING_ADMISSION_POLICY_BINDINGS = Resource(
    _ADMISSION,
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    namespaced=False,
)
APISERVICES = Resource(
    "apiregistration.k8s.io", "v1", "apiservices", "APIService", namespaced=False
)

#: Every kind the operator installs, in the order it deletes them on uninstall (webhooks
#: first, so nothing calls a virt-api that is going away; CRDs last).
MANAGED: tuple[Resource, ...] = (
    VALIDATING_WEBHOOKS,
    MUTATING_WEBHOOKS,
    APISERVICES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
    VALIDATING_ADMISSION_POLICIES,
    DAEMONSETS,
    DEPLOYMENTS,
    SERVICES,
    SECRETS,
    CONFIGMAPS,
    ROLE_BINDINGS,
    ROLES,
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    SERVICE_ACCOUNTS,
    CRDS,
)

_BY_KIND: Mapping[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r for r in (*MANAGED, NAMESPACES)
}


def resource_for(obj: Mapping[str, Any]) -> Resource:
    """The coordinates of `obj` (one of the kinds above); KeyError for any other kind."""
    return _BY_KIND[(str(obj.get("apiVersion")), str(obj.get("kind")))]
