"""aioprometheus (unmaintained) is imported by the metrics facade and nowhere else."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
IMPORT = re.compile(r"^\s*(import|from)\s+aioprometheus\b", re.MULTILINE)


def test_only_the_facade_imports_aioprometheus() -> None:
    sources = [*REPO.glob("libs/*/src/**/*.py"), *REPO.glob("services/*/src/**/*.py")]
    assert sources, f"no sources found under {REPO}"
    importers = sorted(
        str(p.relative_to(REPO)) for p in sources if IMPORT.search(p.read_text(encoding="utf-8"))
    )
    assert importers == ["libs/service-kit/src/service_kit/metrics.py"]
