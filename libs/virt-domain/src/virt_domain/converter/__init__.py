"""The converter VMI -> libvirt domain: an ordered list of small configurators.

Each configurator reads the VMI (through `Context`) and fills its part of the
`Domain`; this module only runs them in order. Output depends on nothing but the
inputs: no I/O, no clock, no host probing.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubevirt_api import VirtualMachineInstance

from ..errors import ConversionError
from ..layout import LauncherLayout
from ..schema import Domain
from ..xmlmap import XmlError
from . import (
    channels,
    clock,
    console,
    controllers,
    cpu,
    disks,
    features,
    firmware,
    graphics,
    hypervisor,
    inputs,
    interfaces,
    iothreads,
    machine,
    memballoon,
    memory,
    metadata,
    panic,
    rng,
    sound,
    sysinfo,
    tpm,
    unsupported,
    watchdog,
)
from .context import Configurator, Context, ConverterOptions, SMBiosInfo, Topology
from .text import unwritable_field

__all__ = [
    "CONFIGURATORS",
    "Configurator",
    "ConversionError",
    "ConverterOptions",
    "SMBiosInfo",
    "Topology",
    "convert",
    "convert_to_xml",
]

#: The conversion, in order. Later steps may read what earlier ones built
#: (controllers look at the disks and inputs; cpu adds to features).
CONFIGURATORS: tuple[Configurator, ...] = (
    unsupported.configure,
    metadata.configure,
    hypervisor.configure,
    memory.configure,
    machine.configure,
    firmware.configure,
    sysinfo.configure,
    features.configure,
    cpu.configure,
    iothreads.configure,
    clock.configure,
    interfaces.configure,
    channels.configure,
    disks.configure,
    inputs.configure,
    controllers.configure,
    graphics.configure,
    memballoon.configure,
    console.configure,
    watchdog.configure,
    rng.configure,
    panic.configure,
    sound.configure,
    tpm.configure,
)


def convert(
    vmi: VirtualMachineInstance,
    options: ConverterOptions | None = None,
    layout: LauncherLayout | None = None,
    *,
    configurators: Sequence[Configurator] = CONFIGURATORS,
) -> Domain:
    """Build the libvirt domain for ``vmi``.

    Raises `ConversionError` (field path + what would be valid) for input that cannot
    be served. Equal inputs give equal domains. One check happens only when formatting:
    a VMI string with a control character makes ``Domain.to_xml()`` raise `XmlError`;
    `convert_to_xml` turns that into a `ConversionError` naming the VMI field.
    """
    ctx = Context(vmi, options or ConverterOptions(), layout or LauncherLayout())
    domain = Domain()
    for configure in configurators:
        configure(ctx, domain)
    return domain


def convert_to_xml(
    vmi: VirtualMachineInstance,
    options: ConverterOptions | None = None,
    layout: LauncherLayout | None = None,
) -> str:
    """`convert`, formatted as the domain XML libvirt is given.

    Raises only `ConversionError` for bad input.
    """
    domain = convert(vmi, options, layout)
    try:
        return domain.to_xml()
    except XmlError:
        refusal = unwritable_field(vmi)
        if refusal is None:
            raise
        raise refusal from None
