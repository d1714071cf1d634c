"""virt-api: KubeVirt's admission webhooks and the subresources.kubevirt.io API.

Build the app with `build_app(AdmissionContext(...), SubresourceContext(...))`; run the
service with `python -m virt_api` (see README.md for flags, routes and the virt-handler
relay interface).
"""

from .app import build_app
from .authz import Decision, ResourceAttributes, authorize
from .frontproxy import FrontProxyConfig, Identity, UnauthenticatedError, identify
from .lifecycle import plan_restart, plan_start, plan_stop
from .relay import (
    HandlerClient,
    HandlerError,
    HandlerLocator,
    HttpHandlerClient,
    StaticHandlerLocator,
    handler_path,
)
from .review import Review, parse_review
from .subresources import SubresourceContext
from .webhooks import WEBHOOKS, AdmissionContext, Webhook

__all__ = [
    "WEBHOOKS",
    "AdmissionContext",
    "Decision",
    "FrontProxyConfig",
    "HandlerClient",
    "HandlerError",
    "HandlerLocator",
    "HttpHandlerClient",
    "Identity",
    "ResourceAttributes",
    "Review",
    "StaticHandlerLocator",
    "SubresourceContext",
    "UnauthenticatedError",
    "Webhook",
    "authorize",
    "build_app",
    "handler_path",
    "identify",
    "parse_review",
    "plan_restart",
    "plan_start",
    "plan_stop",
]
