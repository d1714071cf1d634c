"""metav1.Status answers for the subresource API, in the shape kubectl understands."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

__all__ = ["StatusError", "status_middleware", "status_response"]

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    406: "NotAcceptable",
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


@web.middleware
async def status_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """aiohttp's own refusals (no such route, a method the route does not serve, a body
    over client_max_size) answer a metav1.Status too, as the API server's do:
    clients read an error's message from it, not from aiohttp's plain text."""
    try:
        return await handler(request)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        response = status_response(error.status, error.reason)
        if "Allow" in error.headers:
            response.headers["Allow"] = error.headers["Allow"]
        return response
