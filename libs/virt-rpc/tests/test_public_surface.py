"""The protocol's names load on first use: the socket-file checks alone (what the
launcher's head start needs) load neither grpclib nor the generated messages."""

from __future__ import annotations

import subprocess
import sys

import virt_rpc


def test_socket_file_checks_load_no_protocol() -> None:
    probe = (
        "import sys, virt_rpc.socketfiles; "
        "print(sorted(m for m in sys.modules if m.startswith(('grpclib', 'betterproto2', "
        "'asyncio', 'virt_rpc.generated'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert (result.returncode, result.stdout.strip()) == (0, "[]")


def test_every_public_name_resolves_on_first_use() -> None:
    assert {name: hasattr(virt_rpc, name) for name in virt_rpc.__all__} == dict.fromkeys(
        virt_rpc.__all__, True
    )
