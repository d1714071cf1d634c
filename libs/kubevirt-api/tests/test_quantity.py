"""Quantity parses Kubernetes' syntax exactly and keeps its spelling for round-trips."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubevirt_api import IntOrString, Quantity, QuantityError


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Gi", 1024**3),
        ("1024Mi", 1024**3),
        ("0.5", Fraction(1, 2)),
        ("100m", Fraction(1, 10)),
        ("1e3", 1000),
        ("1E3", 1000),
        ("2E", 2 * 10**18),
        ("64M", 64 * 10**6),
        ("1.5Gi", 3 * 1024**3 // 2),
        ("+3k", 3000),
        ("-2", -2),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("10n", Fraction(1, 10**8)),
        ("1u", Fraction(1, 10**6)),
        (2, 2),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parses_exactly(text: str | int | float, value: Fraction | int) -> None:
    quantity = Quantity.parse(text)
    assert quantity.value == value
    assert quantity.to_json() == text


@pytest.mark.parametrize(
    "text", ["1Gx", "", "Gi", "1 Gi", " 1", "1.2.3", "1e", "0x10", "1KiB", "1gi", "--1"]
)
def test_rejects_malformed(text: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity"):
        Quantity.parse(text)


@pytest.mark.parametrize("text", ["1" * 5000, "0." + "1" * 5000, "1" * 5000 + "Gi"])
def test_rejects_more_digits_than_python_converts(text: str) -> None:
    with pytest.raises(QuantityError, match="too many digits"):
        Quantity.parse(text)


@pytest.mark.parametrize("raw", [True, None, [1], {"a": 1}, float("nan"), float("inf")])
def test_rejects_non_quantities(raw: object) -> None:
    with pytest.raises(QuantityError):
        Quantity.parse(raw)


def test_equality_and_order_are_by_value() -> None:
    assert Quantity.parse("1Gi") == Quantity.parse("1024Mi")
    assert hash(Quantity.parse("1Gi")) == hash(Quantity.parse("1024Mi"))
    assert Quantity.parse("1G") < Quantity.parse("1Gi")
    assert Quantity.parse("500m") <= Quantity.parse("0.5")


def test_arithmetic_is_exact_and_canonical() -> None:
    total = Quantity.parse("1Gi") + Quantity.parse("512Mi")
    assert total.value == 1536 * 1024**2
    assert str(total) == "1536Mi"
    assert str(Quantity.parse("2Gi") - Quantity.parse("1Gi")) == "1Gi"
    assert str(Quantity.parse("100m") * 3) == "300m"
    assert str(Quantity.from_value(3 * 10**9)) == "3G"
    assert Quantity.parse("0.1").to_milli() == 100
    assert Quantity.parse("1.5").to_int() == 2
    assert Quantity.parse("1024Mi").canonical() == "1Gi"


@given(st.integers(min_value=0, max_value=2**62), st.booleans())
def test_canonical_form_parses_back_to_the_same_value(value: int, binary: bool) -> None:
    quantity = Quantity.from_value(value, binary=binary)
    assert Quantity.parse(str(quantity)).value == value


def test_int_or_string() -> None:
    assert IntOrString.parse(8080).is_int
    assert IntOrString.parse("25%").scaled(10) == 3
    assert IntOrString.parse("25%").scaled(10, round_up=False) == 2
    with pytest.raises(ValueError, match="integer or a string"):
        IntOrString.parse(True)
    with pytest.raises(ValueError, match="percentage"):
        IntOrString.parse("x%").scaled(3)
