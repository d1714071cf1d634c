"""metav1.Status answers for the subresource API, in the shape kubectl understands."""

from __future__ import annotations

from aiohttp import web

__all__ = ["StatusError", "status_response"]

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
}


class StatusError(Exception):
    """Raised inside handlers; rendered as a metav1.Status with this code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status_response(code: int, message: str) -> web.Response:
    """A metav1.Status body with the matching HTTP status."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure" if code >= 300 else "Success",
        "message": message,
        "reason": _REASONS.get(code, "Unknown"),
        "code": code,
    }
    return web.json_response(body, status=code)
