"""An ApiError says what the apiserver said, causes included (a 422's message alone is generic)."""

from __future__ import annotations

from kube_runtime import ApiError, ResourceExpiredError


def test_the_causes_of_an_invalid_answer_are_part_of_the_message() -> None:
    body = {
        "kind": "Status",
        "code": 422,
        "reason": "Invalid",
        "message": "the server rejected our request due to an error in our request",
        "details": {
            "causes": [
                {"field": "metadata.resourceVersion", "message": "test failed"},
                {"message": "one more"},
            ]
        },
    }
    error = ApiError.from_status(422, body)
    assert error.status == 422
    assert error.reason == "Invalid"
    assert error.message == (
        "the server rejected our request due to an error in our request "
        "(metadata.resourceVersion: test failed; one more)"
    )


def test_a_status_without_causes_keeps_its_message() -> None:
    error = ApiError.from_status(404, {"code": 404, "reason": "NotFound", "message": "gone"})
    assert (error.status, error.reason, error.message) == (404, "NotFound", "gone")
    assert isinstance(ApiError.from_status(410, None), ResourceExpiredError)
