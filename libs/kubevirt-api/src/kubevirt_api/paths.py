"""The rule for file paths a VMI names inside an image or on the host.

``containerDisk.path``, ``kernelBoot.container.kernelPath``/``initrdPath`` and
``hostDisk.path``: admission refuses them with this rule, the controller checks it again
before it copies files by those paths, and the converter before it writes them into the
domain. One rule, so nothing admission lets through is refused later.
"""

from __future__ import annotations

import re

__all__ = ["image_path_problem"]

# The POSIX portable filename characters, plus '+' (as in "vmlinuz-6.1+deb12").
_COMPONENT = re.compile(r"[A-Za-z0-9._+-]+")


def image_path_problem(value: str) -> str | None:
    """Why ``value`` is not an absolute, normal path to a file; None when it is one.

    Valid: ``/`` followed by components of letters, digits and ``. _ + -``, separated by
    single slashes; no component is ``.`` or ``..``; no trailing slash. The answer is a
    phrase to follow the path in a message (``'/a//b' must …``).
    """
    if not value:
        return "must be an absolute path such as /disk/image.qcow2"
    if not value.startswith("/"):
        return "must be an absolute path (start with /)"
    if value == "/":
        return "must name a file, not the root directory"
    components = value[1:].split("/")
    if "" in components:
        return "must name a file: no empty components ('//' or a trailing '/')"
    if "." in components or ".." in components:
        return "must not contain '.' or '..' components"
    if not all(_COMPONENT.fullmatch(c) for c in components):
        return "may contain only letters, digits, '.', '_', '+', '-' and '/'"
    return None
