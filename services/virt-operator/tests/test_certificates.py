"""Certificates: issued by the install's CA, renewed with upstream's margins."""

from __future__ import annotations

import datetime

from virt_operator.certificates import (
    RotationPolicy,
    issue_ca,
    issue_leaf,
    leaf_specs,
    needs_renewal,
    signed_by,
)

NOW = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)


def test_leaves_are_signed_by_the_ca_and_renewed_with_a_fifth_left() -> None:
    policy = RotationPolicy()
    ca = issue_ca("kubevirt-ca", NOW, policy.ca_duration)
    leaf = issue_leaf(ca, leaf_specs("kubevirt")[0], NOW, policy.cert_duration)
    assert signed_by(leaf.cert, ca.cert)
    assert not signed_by(leaf.cert, issue_ca("other", NOW, 3600).cert)
    later = NOW + datetime.timedelta(hours=19)
    assert not needs_renewal(leaf.cert, later, policy.cert_renew_before)
    assert needs_renewal(leaf.cert, later + datetime.timedelta(hours=1), policy.cert_renew_before)


def test_the_cr_sets_durations_as_upstream() -> None:
    spec = {
        "certificateRotateStrategy": {
            "selfSigned": {
                "ca": {"duration": "48h", "renewBefore": "1h"},
                "server": {"duration": "2h"},
            }
        }
    }
    policy = RotationPolicy.from_kubevirt_spec(spec)
    assert (policy.ca_duration, policy.ca_renew_before) == (48 * 3600, 3600)
    assert (policy.cert_duration, policy.cert_renew_before) == (7200, 7200 * 0.2)
    assert RotationPolicy.from_kubevirt_spec({}) == RotationPolicy()
