"""Declarative object <-> XML mapping for the domain model.

Each model class is a dataclass whose fields say which XML attribute, child element or
text they map to (`attr`, `child`, `text`); this module formats and parses any such
class. Field order is document order, so a parsed document formats back to the same
text (attributes and children in the order the fields are declared, empty elements as
``<x></x>``, two-space indentation, the shape libvirt and KubeVirt emit).
"""

from __future__ import annotations

import dataclasses
import io
import re
import types
import typing
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

__all__ = [
    "NAMESPACE_PREFIXES",
    "XmlError",
    "attr",
    "child",
    "format_xml",
    "parse_xml",
    "text",
]

T = TypeVar("T")

#: Namespaces written with a prefix (declared on the root element by the model);
#: any other namespace is written as a default ``xmlns`` where it starts.
NAMESPACE_PREFIXES: dict[str, str] = {"http://libvirt.org/schemas/domain/qemu/1.0": "qemu"}

_KEY = "virt_domain.xml"


class XmlError(ValueError):
    """A document does not fit the model; ``path`` names the element or attribute."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class _Mapping:
    kind: Literal["attr", "child", "text"]
    name: str


def attr(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A field stored in the XML attribute ``name`` (omitted when None; required without a
    default)."""
    return field(default=default, metadata={_KEY: _Mapping("attr", name)})


def child(
    tag: str,
    default: Any = dataclasses.MISSING,
    *,
    many: bool = False,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """A field stored in child element(s) ``tag``.

    The field's type decides the shape: a model class is a nested element, ``str``/``int``
    an element holding text, ``bool`` an empty element present when True, ``list[...]``
    (with ``many=True``) repeated elements.
    """
    if many:
        return field(default_factory=list, metadata={_KEY: _Mapping("child", tag)})
    if factory is not None:
        return field(default_factory=factory, metadata={_KEY: _Mapping("child", tag)})
    return field(default=default, metadata={_KEY: _Mapping("child", tag)})


def text(default: Any = dataclasses.MISSING) -> Any:
    """A field stored as the element's own character data."""
    return field(default=default, metadata={_KEY: _Mapping("text", "")})


# --- per-class codecs, computed once ----------------------------------------------------

_Scalar = Literal["str", "int", "bool", "model"]


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: Literal["attr", "child", "text"]
    xml_name: str
    scalar: _Scalar
    model: type[Any] | None
    many: bool
    required: bool


_CODECS: dict[type[Any], tuple[_Field, ...]] = {}


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """Strip ``X | None`` and ``list[X]``; return (X, is_list)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {tp!r}")
        return _unwrap(args[0])
    if origin is list:
        (inner,) = typing.get_args(tp)
        return inner, True
    return tp, False


def _codec(cls: type[Any]) -> tuple[_Field, ...]:
    cached = _CODECS.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls)
    fields: list[_Field] = []
    for f in dataclasses.fields(cls):
        mapping = f.metadata.get(_KEY)
        if mapping is None:
            continue
        tp, many = _unwrap(hints[f.name])
        # NewType aliases of str/int map like their base type.
        tp = getattr(tp, "__supertype__", tp)
        scalar: _Scalar
        if tp is bool:
            scalar = "bool"
        elif tp is int:
            scalar = "int"
        elif tp is str:
            scalar = "str"
        elif dataclasses.is_dataclass(tp):
            scalar = "model"
        else:
            raise TypeError(f"{cls.__name__}.{f.name}: unsupported type {tp!r}")
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        fields.append(
            _Field(
                f.name,
                mapping.kind,
                mapping.name,
                scalar,
                tp if scalar == "model" else None,
                many,
                required,
            )
        )
    result = tuple(fields)
    _CODECS[cls] = result
    return result


# --- formatting -------------------------------------------------------------------------


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError("booleans are not written as text")
    return str(value)


# Characters outside XML 1.0's Char production cannot be written at all.
_UNWRITABLE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape_text(value: str) -> str:
    bad = _UNWRITABLE.search(value)
    if bad is not None:
        raise XmlError("/", f"{value!r}: the character {bad.group()!r} cannot be written in XML")
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _escape_attr(value: str) -> str:
    return (
        _escape_text(value)
        .replace('"', "&quot;")
        .replace("\n", "&#xA;")
        .replace("\r", "&#xD;")
        .replace("\t", "&#x9;")
    )


def _qualify(tag: str, default_ns: str) -> tuple[str, str, str | None]:
    """Return (written name, default ns for children, xmlns to declare or None)."""
    if not tag.startswith("{"):
        return tag, default_ns, None
    uri, local = tag[1:].split("}", 1)
    prefix = NAMESPACE_PREFIXES.get(uri)
    if prefix is not None:
        return f"{prefix}:{local}", default_ns, None
    if uri == default_ns:
        return local, default_ns, None
    return local, uri, uri


def _write_element(
    out: io.StringIO, tag: str, obj: Any, depth: int, default_ns: str, indent: str
) -> None:
    name, child_ns, declare = _qualify(tag, default_ns)
    pad = indent * depth
    out.write(f"{pad}<{name}")
    if declare is not None:
        out.write(f' xmlns="{_escape_attr(declare)}"')
    body_text: str | None = None
    children: list[tuple[str, Any, _Field]] = []
    for f in _codec(type(obj)):
        value = getattr(obj, f.name)
        if value is None:
            continue
        if f.kind == "attr":
            out.write(f' {f.xml_name}="{_escape_attr(_scalar_text(value))}"')
        elif f.kind == "text":
            body_text = _scalar_text(value)
        elif f.many:
            children.extend((f.xml_name, item, f) for item in value)
        elif f.scalar == "bool":
            if value:
                children.append((f.xml_name, value, f))
        else:
            children.append((f.xml_name, value, f))
    out.write(">")
    if body_text is not None:
        out.write(_escape_text(body_text))
    if children:
        for child_tag, value, f in children:
            out.write("\n")
            if f.scalar == "model":
                _write_element(out, child_tag, value, depth + 1, child_ns, indent)
            else:
                child_name, _, child_decl = _qualify(child_tag, child_ns)
                decl = f' xmlns="{_escape_attr(child_decl)}"' if child_decl else ""
                inner = "" if f.scalar == "bool" else _escape_text(_scalar_text(value))
                out.write(f"{pad}{indent}<{child_name}{decl}>{inner}</{child_name}>")
        out.write(f"\n{pad}")
    out.write(f"</{name}>")


def format_xml(obj: Any, tag: str | None = None, *, indent: str = "  ") -> str:
    """Format a model object as an XML document (no declaration, no trailing newline).

    ``tag`` defaults to the class attribute ``TAG``.
    """
    root_tag = tag if tag is not None else getattr(type(obj), "TAG", None)
    if root_tag is None:
        raise TypeError(f"{type(obj).__name__} has no TAG; pass tag=")
    out = io.StringIO()
    _write_element(out, root_tag, obj, 0, "", indent)
    return out.getvalue()


# --- parsing ----------------------------------------------------------------------------


def _convert(path: str, raw: str, scalar: _Scalar) -> Any:
    if scalar == "int":
        try:
            return int(raw.strip())
        except ValueError:
            raise XmlError(path, f"expected an integer, got {raw!r}") from None
    return raw


def _read_element(cls: type[T], elem: ET.Element, path: str) -> T:
    kwargs: dict[str, Any] = {}
    by_tag: dict[str, list[ET.Element]] = {}
    for sub in elem:
        by_tag.setdefault(sub.tag, []).append(sub)
    for f in _codec(cls):
        if f.kind == "attr":
            raw = elem.get(f.xml_name)
            if raw is None:
                if f.required:
                    raise XmlError(f"{path}/@{f.xml_name}", "required attribute is missing")
                continue
            kwargs[f.name] = _convert(f"{path}/@{f.xml_name}", raw, f.scalar)
        elif f.kind == "text":
            kwargs[f.name] = _convert(f"{path}/text()", elem.text or "", f.scalar)
        else:
            found = by_tag.get(f.xml_name, [])
            if f.many:
                kwargs[f.name] = [
                    _read_child(f, sub, f"{path}/{_local(f.xml_name)}[{i}]")
                    for i, sub in enumerate(found)
                ]
            elif found:
                kwargs[f.name] = _read_child(f, found[0], f"{path}/{_local(f.xml_name)}")
            elif f.required:
                raise XmlError(f"{path}/{_local(f.xml_name)}", "required element is missing")
    return cls(**kwargs)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _read_child(f: _Field, elem: ET.Element, path: str) -> Any:
    if f.scalar == "model":
        assert f.model is not None
        return _read_element(f.model, elem, path)
    if f.scalar == "bool":
        return True
    return _convert(path, elem.text or "", f.scalar)


def parse_xml(cls: type[T], document: str | bytes, *, tag: str | None = None) -> T:
    """Parse an XML document into ``cls``; raise `XmlError` naming the bad path.

    Elements and attributes the model does not know are ignored. Namespace prefixes
    declared on the root element are kept as ``xmlns:<prefix>`` attributes so that a
    model field can carry them.
    """
    root_tag = tag if tag is not None else getattr(cls, "TAG", None)
    if root_tag is None:
        raise TypeError(f"{cls.__name__} has no TAG; pass tag=")
    data = document.encode() if isinstance(document, str) else document
    declared: list[tuple[str, str]] = []
    root: ET.Element | None = None
    try:
        parser: ET.XMLPullParser[Any] = ET.XMLPullParser(events=("start-ns", "start"))
        parser.feed(data)
        parser.close()
        for item in parser.read_events():
            event, payload = item[0], item[-1]
            if event == "start-ns" and root is None:
                declared.append(typing.cast(tuple[str, str], payload))
            elif event == "start" and root is None:
                root = typing.cast(ET.Element, payload)
    except ET.ParseError as exc:
        raise XmlError("/", f"not well-formed XML: {exc}") from None
    if root is None:
        raise XmlError("/", "empty document")
    if root.tag != root_tag:
        raise XmlError(f"/{_local(root.tag)}", f"expected root element <{_local(root_tag)}>")
    for prefix, uri in declared:
        if prefix:
            root.set(f"xmlns:{prefix}", uri)
    return _read_element(cls, root, f"/{_local(root_tag)}")
