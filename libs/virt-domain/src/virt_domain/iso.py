"""ISO 9660 images (with Joliet and Rock Ridge names) built and read in memory.

Guests read cloud-init and config volumes from these; the caller writes the bytes.
Images carry their build time, so two builds of the same files differ in bytes:
`read_iso` gives back what one holds, for comparing an image on disk with new files.
pycdlib is imported by the first image built or read, not with this module: it is the
largest import of a launcher (2 MiB of its memory), and a VM without cloud-init or config
volumes never needs it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["IsoContents", "IsoError", "iso_image", "read_iso"]

_LABEL = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
_COMPONENT = re.compile(r"^[A-Za-z0-9_.@+=,-]{1,64}$")


class IsoError(ValueError):
    """The requested image cannot be built (bad label or file name)."""


@dataclass(frozen=True, slots=True)
class IsoContents:
    """What an image holds: its volume label and its files (relative path -> contents)."""

    label: str
    files: Mapping[str, bytes]


@dataclass(frozen=True, slots=True)
class _Names:
    iso: str
    joliet: str
    rock_ridge: str


def _iso_component(name: str, taken: set[str], directory: bool) -> str:
    """An ISO 9660 level-3 name (d-characters) unique within its directory."""
    stem = re.sub(r"[^A-Z0-9_]", "_", name.upper())[:24] or "_"
    candidate = stem
    counter = 1
    while candidate in taken:
        suffix = f"_{counter}"
        candidate = stem[: 24 - len(suffix)] + suffix
        counter += 1
    taken.add(candidate)
    return candidate if directory else f"{candidate}.;1"


def iso_image(volume_label: str, files: Mapping[str, bytes]) -> bytes:
    """Build an ISO 9660 image labelled ``volume_label`` holding ``files``.

    ``files`` maps slash-separated relative paths (``openstack/latest/user_data``) to
    contents; directories are created as needed. Names are kept exactly in the Joliet
    and Rock Ridge trees (what Linux and cloud-init read). Raises `IsoError` for a label
    or a path component that an ISO cannot carry (or ``..``).
    """
    if not _LABEL.match(volume_label):
        raise IsoError(f"volume label {volume_label!r} must be 1-32 of [A-Za-z0-9_.-]")
    import pycdlib

    image = pycdlib.PyCdlib()
    image.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=volume_label)
    dirs: dict[str, _Names] = {"": _Names("", "", "")}
    taken: dict[str, set[str]] = {}
    try:
        for path in sorted(files):
            parts = path.split("/")
            for part in parts:
                if part in ("", ".", "..") or not _COMPONENT.match(part):
                    raise IsoError(f"file path {path!r}: component {part!r} is not allowed")
            parent = ""
            for part in parts[:-1]:
                key = f"{parent}/{part}" if parent else part
                if key not in dirs:
                    above = dirs[parent]
                    iso = _iso_component(part, taken.setdefault(parent, set()), True)
                    names = _Names(f"{above.iso}/{iso}", f"{above.joliet}/{part}", part)
                    image.add_directory(
                        names.iso, rr_name=names.rock_ridge, joliet_path=names.joliet
                    )
                    dirs[key] = names
                parent = key
            above = dirs[parent]
            leaf = parts[-1]
            iso = _iso_component(leaf, taken.setdefault(parent, set()), False)
            data = files[path]
            image.add_fp(
                io.BytesIO(data),
                len(data),
                f"{above.iso}/{iso}",
                rr_name=leaf,
                joliet_path=f"{above.joliet}/{leaf}",
            )
        out = io.BytesIO()
        image.write_fp(out)
        return out.getvalue()
    finally:
        image.close()


def read_iso(data: bytes) -> IsoContents:
    """The label and files (by their Rock Ridge names) of an image `iso_image` built.

    Raises `IsoError` when ``data`` is not an ISO 9660 image with Rock Ridge names.
    """
    import pycdlib

    image = pycdlib.PyCdlib()
    try:
        image.open_fp(io.BytesIO(data))
    except pycdlib.pycdlibexception.PyCdlibException as exc:
        raise IsoError(f"not an ISO 9660 image: {exc}") from None
    try:
        if not image.has_rock_ridge():
            raise IsoError("the image has no Rock Ridge names")
        files: dict[str, bytes] = {}
        for directory, _subdirs, names in image.walk(rr_path="/"):
            for name in names:
                path = f"{directory.rstrip('/')}/{name}"
                out = io.BytesIO()
                image.get_file_from_iso_fp(out, rr_path=path)
                files[path.lstrip("/")] = out.getvalue()
        label = image.pvd.volume_identifier.decode(errors="replace").rstrip(" \x00")
        return IsoContents(label, files)
    finally:
        image.close()
