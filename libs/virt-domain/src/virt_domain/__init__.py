"""virt_domain: the libvirt domain model (object <-> XML) and the converter VMI -> domain.

Pure: no I/O, no clocks, no host probing. The launcher and ``virtctl convert`` call it.
"""

from . import devices, schema
from .devices import *  # noqa: F403
from .schema import *  # noqa: F403
from .xmlmap import XmlError, format_xml, parse_xml

__all__ = [*devices.__all__, *schema.__all__, "XmlError", "format_xml", "parse_xml"]
