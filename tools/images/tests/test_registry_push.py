"""Pushing an archive sends only what the registry lacks, and names it by content."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest
from kv_images.progress import Progress
from kv_images.registry import (
    LAYER_MEDIA_TYPE,
    MANIFEST_MEDIA_TYPE,
    Pusher,
    RegistryError,
    read_archive,
    split_ref,
)


@dataclass
class FakeRegistry:
    """In-memory distribution API: blobs per repository, tags -> manifest bytes."""

    blobs: dict[str, set[str]] = field(default_factory=dict)
    manifests: dict[tuple[str, str], bytes] = field(default_factory=dict)
    uploads: list[tuple[str, str]] = field(default_factory=list)
    mounts: list[tuple[str, str, str]] = field(default_factory=list)
    puts: list[tuple[str, str]] = field(default_factory=list)

    def manifest_digest(self, repo: str, tag: str) -> str | None:
        body = self.manifests.get((repo, tag))
        return None if body is None else "sha256:" + hashlib.sha256(body).hexdigest()

    def has_blob(self, repo: str, digest: str) -> bool:
        return digest in self.blobs.get(repo, set())

    def mount_blob(self, repo: str, digest: str, source: str) -> bool:
        self.mounts.append((repo, digest, source))
        if digest not in self.blobs.get(source, set()):
            return False
        self.blobs.setdefault(repo, set()).add(digest)
        return True

    def upload_blob(self, repo: str, digest: str, size: int, data: IO[bytes]) -> None:
        body = data.read()
        # As the real registry: content must match the digest it is uploaded under.
        assert "sha256:" + hashlib.sha256(body).hexdigest() == digest
        assert len(body) == size
        self.uploads.append((repo, digest))
        self.blobs.setdefault(repo, set()).add(digest)

    def put_manifest(self, repo: str, tag: str, media_type: str, body: bytes) -> None:
        assert media_type == MANIFEST_MEDIA_TYPE
        manifest = json.loads(body)
        for blob in [manifest["config"], *manifest["layers"]]:
            assert blob["digest"] in self.blobs.get(repo, set()), "manifest before its blobs"
        self.puts.append((repo, tag))
        self.manifests[(repo, tag)] = body


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_archive(path: Path, ref: str, layers: list[bytes], config_extra: str = "") -> Path:
    """A docker-archive as buildah writes it: blobs named by their sha256."""
    names = []
    with tarfile.open(path, "w") as tar:
        for layer in layers:
            name = hashlib.sha256(layer).hexdigest() + ".tar"
            _add(tar, name, layer)
            names.append(name)
        config = json.dumps({"architecture": "amd64", "os": "linux", "x": config_extra}).encode()
        config_name = hashlib.sha256(config).hexdigest() + ".json"
        _add(tar, config_name, config)
        manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": names}]
        _add(tar, "manifest.json", json.dumps(manifest).encode())
    return path


REF = "docker.io/kubevirt-py/virt-api:0123456789abcdef"
ALIASES = ("docker.io/kubevirt-py/virt-api:devel", "docker.io/kubevirt-py/virt-api:latest")


def test_a_first_push_sends_every_blob_then_the_manifest_under_each_name(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar", REF, [b"base layer", b"app layer"])
    registry = FakeRegistry()
    result = Pusher(registry, Progress()).push("virt-api", archive, REF, ALIASES)
    assert result.pushed
    assert result.blobs_sent == 3
    assert result.tags_set == (REF, *ALIASES)
    assert {tag for _, tag in registry.puts} == {"0123456789abcdef", "devel", "latest"}
    assert result.digest == registry.manifest_digest("kubevirt-py/virt-api", "devel")


def test_pushing_again_sends_nothing(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar", REF, [b"base layer", b"app layer"])
    registry = FakeRegistry()
    Pusher(registry, Progress()).push("virt-api", archive, REF, ALIASES)
    registry.uploads.clear()
    registry.puts.clear()
    again = Pusher(registry, Progress()).push("virt-api", archive, REF, ALIASES)
    assert not again.pushed
    assert (again.blobs_sent, again.tags_set) == (0, ())
    assert registry.uploads == []
    assert registry.puts == []


def test_a_rebuilt_image_sends_only_its_new_layer_and_moves_the_aliases(tmp_path: Path) -> None:
    registry = FakeRegistry()
    old = write_archive(tmp_path / "old.tar", REF, [b"base layer", b"app v1"])
    Pusher(registry, Progress()).push("virt-api", old, REF, ALIASES)
    registry.uploads.clear()
    new_ref = "docker.io/kubevirt-py/virt-api:fedcba9876543210"
    new = write_archive(tmp_path / "new.tar", new_ref, [b"base layer", b"app v2"], "v2")
    result = Pusher(registry, Progress()).push("virt-api", new, new_ref, ALIASES)
    sent = {digest for _, digest in registry.uploads}
    assert hashlib.sha256(b"app v2").hexdigest() in {d.removeprefix("sha256:") for d in sent}
    assert "sha256:" + hashlib.sha256(b"base layer").hexdigest() not in sent
    assert result.tags_set == (new_ref, *ALIASES)
    assert registry.manifest_digest("kubevirt-py/virt-api", "latest") == result.digest


def test_a_layer_another_repository_got_in_this_push_is_mounted_not_sent(tmp_path: Path) -> None:
    registry = FakeRegistry()
    pusher = Pusher(registry, Progress())
    api = write_archive(tmp_path / "api.tar", REF, [b"python-base", b"api"])
    ctl_ref = "docker.io/kubevirt-py/virt-controller:0123456789abcdef"
    ctl = write_archive(tmp_path / "ctl.tar", ctl_ref, [b"python-base", b"controller"], "c")
    pusher.push("virt-api", api, REF)
    pusher.push("virt-controller", ctl, ctl_ref)
    base = "sha256:" + hashlib.sha256(b"python-base").hexdigest()
    assert ("kubevirt-py/virt-controller", base, "kubevirt-py/virt-api") in registry.mounts
    assert ("kubevirt-py/virt-controller", base) not in registry.uploads


def test_an_alias_in_another_repository_gets_the_blobs_first(tmp_path: Path) -> None:
    ref = "docker.io/kubevirt-py/guest-kernel-boot:0123456789abcdef"
    alias = "registry:5000/kubevirt/alpine-ext-kernel-boot-demo:devel"
    archive = write_archive(tmp_path / "g.tar", ref, [b"kernel"])
    registry = FakeRegistry()
    result = Pusher(registry, Progress()).push("guest-kernel-boot", archive, ref, [alias])
    assert ("kubevirt/alpine-ext-kernel-boot-demo", "devel") in registry.puts
    assert result.tags_set == (ref, alias)


def test_the_manifest_is_oci_with_uncompressed_layers_named_by_their_diff_ids(
    tmp_path: Path,
) -> None:
    archive = write_archive(tmp_path / "a.tar", REF, [b"one", b"two"])
    image = read_archive(archive)
    manifest = json.loads(image.manifest)
    assert manifest["mediaType"] == MANIFEST_MEDIA_TYPE
    assert [layer["mediaType"] for layer in manifest["layers"]] == [LAYER_MEDIA_TYPE] * 2
    assert [layer["digest"] for layer in manifest["layers"]] == [
        "sha256:" + hashlib.sha256(b"one").hexdigest(),
        "sha256:" + hashlib.sha256(b"two").hexdigest(),
    ]
    assert read_archive(archive).digest == image.digest  # same bytes every time


def test_an_archive_whose_blobs_are_not_named_by_digest_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.tar"
    with tarfile.open(path, "w") as tar:
        _add(tar, "layer.tar", b"x")
        _add(tar, "config.json", b"{}")
        entry = [{"Config": "config.json", "RepoTags": [REF], "Layers": ["layer.tar"]}]
        _add(tar, "manifest.json", json.dumps(entry).encode())
    with pytest.raises(RegistryError, match="not named by its sha256"):
        read_archive(path)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("docker.io/kubevirt-py/pause:abc", ("kubevirt-py/pause", "abc")),
        (
            "registry:5000/kubevirt/cirros-container-disk-demo:devel",
            ("kubevirt/cirros-container-disk-demo", "devel"),
        ),
        ("10.95.0.26:27505/kubevirt-py/virt-api:x", ("kubevirt-py/virt-api", "x")),
        ("kubevirt-py/guest-kernel-boot", ("kubevirt-py/guest-kernel-boot", "latest")),
        ("localhost/tiny:1", ("tiny", "1")),
    ],
)
def test_a_reference_maps_to_the_registry_path_a_mirror_sees(
    ref: str, expected: tuple[str, str]
) -> None:
    assert split_ref(ref) == expected
