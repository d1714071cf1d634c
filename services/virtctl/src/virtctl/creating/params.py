"""Flags of the form `--flag key:value,key:value` (upstream's params), and their errors."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Literal

from kubevirt_api.admission.guest import is_dns_label
from kubevirt_api.quantity import Quantity, QuantityError

__all__ = [
    "FlagError",
    "ParamKind",
    "check_dns_label",
    "check_quantity",
    "parse_params",
    "random_suffix",
    "split_prefixed_name",
]

#: How a param's value is read: text, a non-negative integer, or a quantity.
ParamKind = Literal["str", "uint", "quantity"]

# Kubernetes' rand.String alphabet: no vowels (no words) and no look-alikes.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def random_suffix(length: int = 5) -> str:
    """The random part of a generated name (`vm-` + 5 characters, as upstream)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


class FlagError(ValueError):
    """A flag's value is not valid; the message names the flag and what would be."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f'failed to parse "--{flag}" flag: {message}')
        self.flag = flag


def parse_params(flag: str, text: str, known: Mapping[str, ParamKind]) -> dict[str, str | int]:
    """`key:value,...` into a dict; every key must be in `known` (its kind says how to
    read the value). Raises FlagError for empty input, a part without a colon, an
    unreadable value or unknown keys."""
    if not text:
        raise FlagError(flag, "params may not be empty")
    raw: dict[str, str] = {}
    for part in text.split(","):
        key, colon, value = part.partition(":")
        if not colon:
            raise FlagError(flag, f"params need to have at least one colon: {part}")
        raw[key] = value
    unknown = [f"{k}:{v}" for k, v in raw.items() if k not in known]
    if unknown:
        supported = ",".join(f"{k}:{kind}" for k, kind in known.items())
        raise FlagError(flag, f"unknown param(s): {','.join(unknown)} (supported: {supported})")
    out: dict[str, str | int] = {}
    for key, value in raw.items():
        kind = known[key]
        if kind == "uint":
            if not value.isdigit() or int(value) >= 2**32:
                raise FlagError(
                    flag, f'failed to parse param "{key}": {value!r} is not a non-negative integer'
                )
            out[key] = int(value)
        elif kind == "quantity":
            out[key] = check_quantity(flag, value, f'param "{key}"')
        else:
            out[key] = value
    return out


def check_quantity(flag: str, value: str, what: str = "value") -> str:
    """`value` when it is a Kubernetes quantity (e.g. 512Mi), else FlagError."""
    try:
        Quantity.parse(value)
    except QuantityError as error:
        raise FlagError(flag, f"failed to parse {what}: {error}") from None
    return value


def check_dns_label(flag: str, name: str) -> str:
    """`name` when it is an RFC 1123 label (a volume name), else FlagError."""
    if not is_dns_label(name):
        raise FlagError(
            flag,
            f'invalid name "{name}": a lowercase RFC 1123 label must consist of lower case '
            "alphanumeric characters or '-', start and end with an alphanumeric character "
            "and be at most 63 characters (e.g. 'my-name' or '123-abc')",
        )
    return name


def split_prefixed_name(flag: str, text: str, what: str = "") -> tuple[str, str]:
    """`prefix/name` or `name` into (prefix, name); refuses more slashes or no name."""
    parts = text.split("/")
    if len(parts) > 2:
        raise FlagError(flag, f"{what}invalid count {len(parts) - 1} of slashes in prefix/name")
    prefix, name = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
    if not name:
        raise FlagError(flag, f"{what}name cannot be empty")
    return prefix, name
