"""Build images in dependency order, cached by content key; push them to a registry (or
import them into a containerd).

An image's key digests its Containerfile, build args, context inputs and its base's key.
Its archive (`archives/<name>-<tag>.tar`, tag = first 16 hex of the key) is the cache: when
it exists the image is not rebuilt. Pushes and imports also point `:devel` and `:latest`
(and the upstream examples' names) at the newest build (`aliases`).
"""

from __future__ import annotations

import fcntl
import json
import re
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from kv_images.buildah import Buildah
from kv_images.catalog import CATALOG, UPSTREAM_ALIASES, closure, repository
from kv_images.containerd import Containerd
from kv_images.digest import ContentKey
from kv_images.progress import Progress
from kv_images.registry import Pusher, PushResult, RegistryApi
from kv_images.workspace import Layout

__all__ = ["DEV_TAG", "LATEST_TAG", "Builder", "BuiltImage", "aliases", "read_index"]

DEV_TAG = "devel"
# What `kubevirt-py/<name>` without a tag means; the examples name the guests this way.
LATEST_TAG = "latest"
_CONTENT_TAG = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True)
class BuiltImage:
    """A built image: `ref` is the content-tagged reference, `dev_ref` its `:devel` alias."""

    name: str
    ref: str
    dev_ref: str
    key: str
    archive: Path
    size: int
    cached: bool
    seconds: float


def aliases(image: BuiltImage, *, upstream: bool = True) -> tuple[str, ...]:
    """The other names of the newest build: `:devel`, `:latest` and (`upstream`) the names
    upstream KubeVirt's examples use for the guests."""
    latest = f"{repository(image.name)}:{LATEST_TAG}"
    extra = UPSTREAM_ALIASES.get(image.name, ()) if upstream else ()
    return (image.dev_ref, latest, *extra)


def read_index(layout: Layout) -> dict[str, dict[str, object]]:
    """The last build's record per image name (empty if nothing was built yet)."""
    try:
        raw = json.loads(layout.index.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return raw if isinstance(raw, dict) else {}


class Builder:
    """Builds catalog images for one workspace into one cache layout."""

    def __init__(self, workspace: Path, layout: Layout, progress: Progress) -> None:
        self.workspace = workspace
        self.layout = layout
        self.progress = progress
        self.buildah = Buildah(layout.storage, layout.runroot)
        self._keys: dict[str, str] = {}

    def key(self, name: str) -> str:
        """The content key of image `name` (its base's key included)."""
        if name not in self._keys:
            spec = CATALOG[name]
            key = ContentKey("image/1").add("name", name)
            key.add("containerfile", spec.containerfile_path(self.workspace).read_bytes())
            key.add_all("arg", (f"{k}={v}" for k, v in sorted(spec.build_args.items())))
            key.add("context", spec.context.key(self.workspace))
            if spec.base:
                key.add("base", self.key(spec.base))
            self._keys[name] = key.hexdigest()
        return self._keys[name]

    def ref(self, name: str) -> str:
        return f"{repository(name)}:{self.key(name)[:16]}"

    def build(self, names: Iterable[str]) -> list[BuiltImage]:
        """Build `names` and their bases (bases first); returns every image in that order.

        One build at a time per cache (a file lock): buildah's storage is shared.
        """
        self.layout.root.mkdir(parents=True, exist_ok=True)
        with (self.layout.root / ".lock").open("a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.progress.say(
                    "cache", f"waiting for another kv-images build in {self.layout.root}"
                )
                fcntl.flock(lock, fcntl.LOCK_EX)
            return [self._ensure(name) for name in closure(list(names))]

    def _ensure(self, name: str) -> BuiltImage:
        spec = CATALOG[name]
        start = time.monotonic()
        ref = self.ref(name)
        archive = self.layout.archives / f"{name}-{self.key(name)[:16]}.tar"
        cached = archive.exists()
        if cached:
            self.progress.say(name, f"cached {ref} ({archive.stat().st_size / 2**20:.0f} MiB)")
        else:
            self.buildah.check_host()
            build_args = dict(spec.build_args)
            if spec.base:
                base_ref = self.ref(spec.base)
                if not self.buildah.has_image(base_ref):
                    base_archive = (
                        self.layout.archives / f"{spec.base}-{self.key(spec.base)[:16]}.tar"
                    )
                    with self.progress.step(name, f"loading base {base_ref}"):
                        self.buildah.load_archive(base_archive)
                build_args["BASE"] = base_ref
            with tempfile.TemporaryDirectory(
                prefix=f"kv-ctx-{name}-", dir=self.layout.work()
            ) as tmp:
                context = Path(tmp)
                spec.context.populate(context, self.workspace, self.layout, self.progress)
                with self.progress.step(name, f"buildah build {spec.containerfile}"):
                    self.buildah.build(
                        image=name,
                        containerfile=spec.containerfile_path(self.workspace),
                        context=context,
                        tag=ref,
                        build_args=build_args,
                        progress=self.progress,
                    )
            archive.parent.mkdir(parents=True, exist_ok=True)
            with self.progress.step(name, "saving archive"):
                self.buildah.save_archive(ref, archive)
            self._prune(name, keep=archive)
            # vfs keeps a full copy per image: keep only the newest of each base, the one
            # service images are built FROM.
            repo = f"{repository(name)}:"
            for stored in self.buildah.images():
                if stored.startswith(repo) and (stored != ref or spec.kind != "base"):
                    self.buildah.remove_image(stored)
            self.progress.say(name, f"built {ref} ({archive.stat().st_size / 2**20:.0f} MiB)")
        built = BuiltImage(
            name=name,
            ref=ref,
            dev_ref=f"{repository(name)}:{DEV_TAG}",
            key=self.key(name),
            archive=archive,
            size=archive.stat().st_size,
            cached=cached,
            seconds=time.monotonic() - start,
        )
        self._record(built)
        return built

    def _prune(self, name: str, keep: Path) -> None:
        """Keep the two newest archives of `name` (this build and the one before)."""
        older = sorted(
            (
                p
                for p in self.layout.archives.glob(f"{name}-*.tar")
                if p != keep
                and p.name.removeprefix(f"{name}-")[:16].isalnum()
                and len(p.name) == len(name) + 21
            ),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for stale in older[1:]:
            stale.unlink(missing_ok=True)

    def _record(self, built: BuiltImage) -> None:
        index = read_index(self.layout)
        entry = asdict(built)
        entry["archive"] = str(built.archive)
        del entry["cached"], entry["seconds"]
        index[built.name] = entry
        self.layout.root.mkdir(parents=True, exist_ok=True)
        tmp = self.layout.index.with_suffix(".tmp")
        tmp.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.layout.index)

    def import_into(self, images: Iterable[BuiltImage], socket: Path) -> None:
        """Import every image `socket`'s containerd lacks, and (re)point its `:devel` tag."""
        containerd = Containerd(socket)
        present = containerd.image_names()
        for image in images:
            if image.ref in present:
                containerd.tag_aliases(image.ref, aliases(image))
                continue
            with self.progress.step(image.name, f"importing into containerd {socket}"):
                containerd.import_archive(image.archive, image.ref, aliases(image))
            # Tags whose archive the cache no longer keeps are older builds: drop them
            # (containers still running keep their snapshots).
            # Only content tags (16 hex digits) are ours to drop; others (`devel`, tags other
            # tools set) stay.
            prefix = f"{repository(image.name)}:"
            for name in sorted(present):
                tag = name.removeprefix(prefix)
                stale = (
                    name.startswith(prefix)
                    and name != image.ref
                    and _CONTENT_TAG.fullmatch(tag) is not None
                    and not (self.layout.archives / f"{image.name}-{tag}.tar").exists()
                )
                if stale:
                    containerd.remove(name)

    def push_to(
        self,
        images: Iterable[BuiltImage],
        registry: RegistryApi,
        *,
        upstream: bool = True,
        tags: Iterable[str] = (),
    ) -> list[PushResult]:
        """Push every image (and its aliases) the registry lacks; an image whose manifest the
        registry already holds under its content tag costs one HEAD per name. `upstream`:
        also the upstream examples' names (the local cluster's registry mirrors them);
        `tags`: more tags of every image (a release's version, the same for all)."""
        tags = tuple(tags)
        pusher = Pusher(registry, self.progress)
        results = []
        for image in images:
            start = time.monotonic()
            names = (
                *aliases(image, upstream=upstream),
                *(f"{repository(image.name)}:{t}" for t in tags),
            )
            result = pusher.push(image.name, image.archive, image.ref, names)
            if result.pushed:
                self.progress.say(
                    image.name,
                    f"pushed {image.ref} ({result.blobs_sent} blob(s) sent) in "
                    f"{time.monotonic() - start:.1f} s",
                )
            elif result.tags_set:
                self.progress.say(
                    image.name, f"in the registry; tagged {', '.join(result.tags_set)}"
                )
            results.append(result)
        return results
