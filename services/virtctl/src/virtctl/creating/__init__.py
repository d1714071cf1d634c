"""`virtctl create vm|instancetype|preference`: manifests built offline from flags.

Pure: each builder takes parsed options and returns the object (or raises FlagError
naming the flag and what is valid); the command module prints it as YAML.
"""

from __future__ import annotations

from virtctl.creating.params import FlagError, random_suffix

__all__ = ["FlagError", "random_suffix"]
