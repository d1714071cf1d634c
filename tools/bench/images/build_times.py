"""Image build times, cold and warm, and image sizes (printed, never judged).

Run: ``uv run python tools/bench/images/build_times.py [--cold] [IMAGE...]``

warm: `kv-images build` against the normal cache (~/.cache/kubevirt-py/images): every
image whose content key is unchanged is taken from its archive.
--cold: the same build into a fresh, temporary cache dir (debootstrap, wheel downloads and
builds, buildah builds all happen), then a second, warm build against that dir; the temporary
cache is deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from kv_images import Builder, BuiltImage, Layout, Progress, find_workspace
from kv_images.cli import DEFAULT_IMAGES


def _build(layout: Layout, names: list[str]) -> tuple[float, list[BuiltImage]]:
    builder = Builder(find_workspace(), layout, Progress(out=sys.stderr))
    start = time.monotonic()
    built = builder.build(names)
    return time.monotonic() - start, built


def _table(label: str, seconds: float, built: list[BuiltImage]) -> None:
    print(f"{label}: {seconds:.1f} s for {len(built)} images")
    for image in built:
        state = "cached" if image.cached else f"built {image.seconds:6.1f} s"
        print(f"  {image.name:22} {image.size / 2**20:7.1f} MiB  {state}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cold", action="store_true", help="also build into a fresh cache")
    parser.add_argument("names", nargs="*", default=list(DEFAULT_IMAGES))
    args = parser.parse_args()
    if args.cold:
        tmp = Path(tempfile.mkdtemp(prefix="kv-images-cold-", dir=Path.home() / ".cache"))
        try:
            layout = Layout(tmp)
            cold, built = _build(layout, args.names)
            warm, again = _build(layout, args.names)
            _table("cold (empty cache)", cold, built)
            _table("warm (same cache, nothing changed)", warm, again)
            print(f"ratio cold/warm: {cold / max(warm, 1e-3):.0f}x")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        warm, built = _build(Layout.default(), args.names)
        _table("warm (default cache)", warm, built)
    total = sum(image.size for image in built)
    print(f"archives total: {total / 2**20:.0f} MiB (uncompressed layers, docker-archive)")
    print(f"cache: {os.environ.get('KV_IMAGES_CACHE_DIR') or Layout.default().root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
