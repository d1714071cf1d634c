"""Config volume ISOs land where the domain expects them, with the right label."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubevirt_api import VirtualMachineInstance
from virt_domain import ConversionError, config_volume_media, convert

VmiFactory = Callable[..., VirtualMachineInstance]


@pytest.mark.parametrize(
    ("source", "label"),
    [
        ({"configMap": {"name": "cm"}}, "cfgdata"),
        ({"secret": {"secretName": "s", "volumeLabel": "SECRETS"}}, "SECRETS"),
        ({"serviceAccount": {"serviceAccountName": "sa"}}, "cfgdata"),
    ],
)
def test_iso_path_matches_the_domain_disk(
    make_vmi: VmiFactory, source: dict[str, object], label: str
) -> None:
    vmi = make_vmi({"devices": {"disks": [{"name": "cfg"}]}}, volumes=[{"name": "cfg", **source}])
    assert vmi.spec.volumes is not None
    media = config_volume_media(vmi.spec.volumes[0], {"app.conf": b"x=1\n"})
    disk_source = convert(vmi).devices.disks[0].source
    assert disk_source is not None
    assert media.path == disk_source.file
    assert media.label == label
    assert media.iso()[32768 + 40 : 32768 + 40 + len(label)] == label.encode()


def test_other_volumes_are_refused(make_vmi: VmiFactory) -> None:
    vmi = make_vmi(volumes=[{"name": "e", "emptyDisk": {"capacity": "1Gi"}}])
    assert vmi.spec.volumes is not None
    with pytest.raises(ConversionError):
        config_volume_media(vmi.spec.volumes[0], {})
