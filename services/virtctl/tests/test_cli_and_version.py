"""The command frame: subcommands, version, usage errors, and no tracebacks ever."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from virtctl import cli
from virtctl.commands import validate

if TYPE_CHECKING:
    from conftest import Run


def test_version_prints_client_version(run: Run) -> None:
    result = run("version", "-c")
    assert result.code == 0
    assert result.out.startswith("Client Version: v0.1.0 (kubevirt-py, ")
    assert "Server Version" not in result.out


def test_version_json(run: Run) -> None:
    result = run("version", "--client", "-o", "json")
    assert json.loads(result.out)["clientVersion"]["gitVersion"] == "v0.1.0"


def test_missing_subcommand_is_a_usage_error(run: Run) -> None:
    result = run()
    assert result.code == 2
    assert "usage: virtctl" in result.err


def test_validate_needs_a_file(run: Run) -> None:
    result = run("validate")
    assert result.code == 2
    assert "-f/--filename" in result.err


def test_internal_error_is_one_line(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(*_args: object, **_kwargs: object) -> list[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(validate, "validate", explode)
    result = run("validate", "-f", "-", stdin="apiVersion: kubevirt.io/v1\nkind: VirtualMachine\n")
    assert result.code == cli.EXIT_INTERNAL
    assert result.err.strip().splitlines() == [
        "virtctl: internal error: RuntimeError: boom (set VIRTCTL_DEBUG=1 for a traceback)"
    ]


def test_installed_entry_point_runs(repo: Path) -> None:
    virtctl = Path(sys.executable).parent / "virtctl"
    done = subprocess.run(
        [str(virtctl), "validate", "-f", str(repo / "examples")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    broken = subprocess.run(
        [str(virtctl), "validate", "-f", "-"],
        input="kind: [\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert broken.returncode == 1
    assert broken.stdout.startswith("<stdin>: invalid YAML at line 2")
    assert "Traceback" not in broken.stderr


@pytest.mark.parametrize(
    ("argv", "missing"),
    [
        (["image-upload", "dv", "disk", "--size=1Gi", "--image-path=x.img"], "CDI"),
        (["usbredir", "1234:5678", "vmi1"], "USB redirection client"),
        (["guestfs", "pvc1"], "libguestfs-tools"),
    ],
)
def test_an_absent_capability_is_one_line_naming_it(
    run: Run, argv: list[str], missing: str
) -> None:
    result = run(*argv)
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert result.err.startswith(f"virtctl {argv[0]}: not available: it needs ")
    assert missing in result.err


def test_permitted_devices_prints_upstreams_text() -> None:
    from virtctl.commands.permitted_devices import render

    kubevirt = {
        "spec": {
            "configuration": {
                "permittedHostDevices": {
                    "pciHostDevices": [
                        {"pciVendorSelector": "10DE:1EB8", "resourceName": "nvidia.com/TU104GL"},
                        {"pciVendorSelector": "8086:6F54", "resourceName": "intel.com/qat"},
                    ],
                    "mediatedDevices": [
                        {"mdevNameSelector": "GRID T4-1Q", "resourceName": "nvidia.com/GRID_T4-1Q"}
                    ],
                }
            }
        }
    }
    assert render(kubevirt) == (
        "Permitted Devices: \nHost Devices: \nnvidia.com/TU104GL, intel.com/qat \n"
        "GPU Devices: \nnvidia.com/GRID_T4-1Q\n"
    )
    assert render({}) == "Permitted Devices: \nHost Devices: \n \nGPU Devices: \n\n"
