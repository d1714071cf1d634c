"""AdmissionReview parsing: every malformed shape is refused with a clear message."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kubevirt_api.admission import Cause
from virt_api.review import MalformedReviewError, allow, deny, parse_review


def review(**request: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachine"},
        "resource": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
        "operation": "CREATE",
        "object": {"kind": "VirtualMachine"},
        "userInfo": {"username": "alice", "groups": ["devs"]},
    }
    base.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": base}


def test_valid_review_is_read() -> None:
    parsed = parse_review(review())
    assert (parsed.uid, parsed.kind, parsed.user.username, parsed.user.groups) == (
        "u-1",
        "VirtualMachine",
        "alice",
        ("devs",),
    )


@pytest.mark.parametrize(
    ("body", "uid"),
    [
        ([], None),
        (
            {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}},
            None,
        ),
        (review(uid=7), None),
        (review(operation="SMASH"), "u-1"),
        (review(object="nope"), "u-1"),
        (review(operation="UPDATE"), "u-1"),
        (review(userInfo={"groups": "root"}), "u-1"),
        (review(kind=None), "u-1"),
    ],
)
def test_malformed_reviews_are_refused(body: Any, uid: str | None) -> None:
    with pytest.raises(MalformedReviewError) as caught:
        parse_review(body)
    assert caught.value.uid == uid


def test_allow_carries_a_base64_json_patch() -> None:
    answer = allow("u-1", [{"op": "add", "path": "/spec/x", "value": 1}])
    response = answer["response"]
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/spec/x", "value": 1}
    ]


def test_deny_lists_every_cause_with_its_field() -> None:
    answer = deny("u-1", [Cause("spec.a", "bad a"), Cause("spec.b", "bad b")])
    status = answer["response"]["status"]
    assert status["message"] == "spec.a: bad a; spec.b: bad b"
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.a", "spec.b"]
    assert answer["response"]["allowed"] is False
