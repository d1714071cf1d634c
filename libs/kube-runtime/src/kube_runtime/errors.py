"""Errors raised by kube_runtime, carrying the API server's Status when there is one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ApiError", "KubeconfigError", "ResourceExpiredError"]


class KubeconfigError(Exception):
    """The kubeconfig (or a token file) cannot be used; the message is one line and names the file."""


class ApiError(Exception):
    """The API server answered with a non-2xx status (or a watch ERROR event)."""

    def __init__(self, status: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message

    @classmethod
    def from_status(cls, status: int, body: Mapping[str, Any] | None) -> ApiError:
        """Build from an HTTP status and a metav1.Status body (which may be absent)."""
        reason = ""
        message = ""
        if isinstance(body, Mapping):
            code = body.get("code")
            if isinstance(code, int) and code:
                status = code
            reason = str(body.get("reason") or "")
            message = str(body.get("message") or "")
            causes = _causes(body.get("details"))
            if causes and causes not in message:
                # A 422's message is often generic ("… an error in our request"); the
                # causes say which field and why (e.g. a JSON patch `test` that failed).
                message = f"{message} ({causes})" if message else causes
        if status == 410:
            return ResourceExpiredError(status, reason or "Expired", message)
        return cls(status, reason, message)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


def _causes(details: object) -> str:
    if not isinstance(details, Mapping):
        return ""
    parts = []
    for cause in details.get("causes") or ():
        if isinstance(cause, Mapping):
            field, text = cause.get("field"), cause.get("message")
            parts.append(f"{field}: {text}" if field and text else str(text or field or ""))
    return "; ".join(p for p in parts if p)


class ResourceExpiredError(ApiError):
    """410 Gone / Expired: the resourceVersion is too old; the caller must relist."""
