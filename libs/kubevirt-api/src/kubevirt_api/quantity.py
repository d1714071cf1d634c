"""Kubernetes resource quantities (``1Gi``, ``512Mi``, ``100m``, ``0.5``, ``1e3``) with exact arithmetic."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

__all__ = [
    "EXPECTED",
    "Quantity",
    "QuantityError",
]

_PATTERN: Final = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)

_BINARY: Final = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL: Final = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}

EXPECTED: Final = (
    "expected a number with an optional suffix: binary Ki, Mi, Gi, Ti, Pi, Ei; decimal n, u, m, "
    "k, M, G, T, P, E; or an exponent e<N> (for example 1Gi, 512Mi, 100m, 0.5, 1e3)"
)


class QuantityError(ValueError):
    """Raised when a value is not a Kubernetes quantity."""


@dataclass(frozen=True, eq=False)
class Quantity:
    """An exact quantity that remembers how it was written.

    ``value`` is exact (a Fraction); ``original`` is what the input held (str, int or float)
    and is what :meth:`to_json` returns, so a load/dump round-trip keeps ``1024Mi`` as is.
    Comparison and hashing use the exact value: ``Quantity.parse("1Gi") == Quantity.parse("1024Mi")``.
    """

    value: Fraction
    original: str | int | float

    @classmethod
    def parse(cls, raw: object) -> Quantity:
        """Parse a quantity from a string, int or float; raise QuantityError otherwise."""
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise QuantityError(f"invalid quantity {raw!r}; {EXPECTED}")
        if isinstance(raw, float) and not math.isfinite(raw):
            raise QuantityError(f"invalid quantity {raw!r}; {EXPECTED}")
        text = raw if isinstance(raw, str) else repr(raw)
        match = _PATTERN.match(text.strip()) if text == text.strip() else None
        if match is None:
            raise QuantityError(f"invalid quantity {text!r}; {EXPECTED}")
        try:
            number = Fraction(match["number"])
        except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
            raise QuantityError(
                f"invalid quantity of {len(text)} characters: too many digits; {EXPECTED}"
            ) from None
        suffix = match["suffix"] or ""
        if suffix in _BINARY:
            value = number * (1024 ** _BINARY[suffix])
        elif suffix in _DECIMAL:
            value = number * Fraction(10) ** _DECIMAL[suffix]
        else:
            exponent = int(suffix[1:])
            if abs(exponent) > 100:
                raise QuantityError(f"invalid quantity {text!r}: exponent out of range")
            value = number * Fraction(10) ** exponent
        return cls(value=value, original=raw)

    @classmethod
    def from_value(cls, value: Fraction | int, *, binary: bool = False) -> Quantity:
        """Build a quantity from an exact value, written in canonical form."""
        return cls(value=Fraction(value), original=_format(Fraction(value), binary=binary))

    def to_json(self) -> str | int | float:
        """The value to put back into a manifest (the original form)."""
        return self.original

    def canonical(self) -> str:
        """The canonical string (binary suffix when the input used one)."""
        binary = isinstance(self.original, str) and self.original.endswith("i")
        return _format(self.value, binary=binary)

    def to_int(self) -> int:
        """The value rounded up to an integer, as Kubernetes' ``Value()`` does."""
        return math.ceil(self.value)

    def to_milli(self) -> int:
        """The value in thousandths, rounded up, as Kubernetes' ``MilliValue()`` does."""
        return math.ceil(self.value * 1000)

    def __str__(self) -> str:
        return str(self.original)

    def __repr__(self) -> str:
        return f"Quantity({self.original!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= other.value

    def __gt__(self, other: Quantity) -> bool:
        return self.value > other.value

    def __ge__(self, other: Quantity) -> bool:
        return self.value >= other.value

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity.from_value(self.value + other.value, binary=self._binary(other))

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity.from_value(self.value - other.value, binary=self._binary(other))

    def __mul__(self, factor: int | Fraction) -> Quantity:
        return Quantity.from_value(self.value * factor, binary=self._binary(self))

    def _binary(self, other: Quantity) -> bool:
        return any(isinstance(q.original, str) and q.original.endswith("i") for q in (self, other))


def _format(value: Fraction, *, binary: bool) -> str:
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude.denominator == 1:
        whole = magnitude.numerator
        if binary and whole % 1024 == 0:
            exponent = 0
            while whole % 1024 == 0 and exponent < 6:
                whole //= 1024
                exponent += 1
            suffix = next(name for name, power in _BINARY.items() if power == exponent)
            return f"{sign}{whole}{suffix}"
        exponent = 0
        while whole % 1000 == 0 and exponent < 18:
            whole //= 1000
            exponent += 3
        suffix = next(name for name, power in _DECIMAL.items() if power == exponent)
        return f"{sign}{whole}{suffix}"
    for suffix, power in (("m", 3), ("u", 6), ("n", 9)):
        scaled = magnitude * 10**power
        if scaled.denominator == 1:
            return f"{sign}{scaled.numerator}{suffix}"
    # Kubernetes rounds sub-nano precision up to the next nano.
    return f"{sign}{math.ceil(magnitude * 10**9)}n"
