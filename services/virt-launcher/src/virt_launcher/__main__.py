"""``python -m virt_launcher``: the launcher image's entry point.

libvirtd, and its probe of QEMU, start first (`virt_launcher.headstart`); the launcher's
modules are imported while they run.
"""

import sys

from virt_launcher.headstart import begin_head_start

__all__: list[str] = []


def _launch() -> int:
    head_start = begin_head_start(sys.argv[1:])
    from virt_launcher.main import main  # the heavy imports, while libvirtd starts

    return main(head_start=head_start)


sys.exit(_launch())
