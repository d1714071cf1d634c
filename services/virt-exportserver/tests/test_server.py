"""virt-exportserver against real files: the token, raw and gzip bodies, path refusal."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from blockbuster import blockbuster_ctx
from virt_exportserver import (
    ConfigError,
    Volume,
    build_app,
    open_image,
    settings_from_env,
    volumes_from_env,
)
from virt_exportserver.server import CHUNK

TOKEN = "t0ken-of-twenty-char"


def image_bytes(size: int) -> bytes:
    # Not all one byte, so a reordered or repeated chunk would show.
    return bytes((i * 7 + i // 4096) % 251 for i in range(size))


@pytest.fixture
def mount(tmp_path: Path) -> Path:
    directory = tmp_path / "export-volumes" / "disk"
    directory.mkdir(parents=True)
    (directory / "disk.img").write_bytes(image_bytes(3 * CHUNK + 12345))
    return directory


@pytest.fixture
async def client(mount: Path) -> AsyncIterator[TestClient]:  # type: ignore[type-arg]
    volume = Volume(str(mount), "/volumes/disk/disk.img", "/volumes/disk/disk.img.gz")
    app = build_app([volume], lambda: TOKEN)
    async with TestClient(TestServer(app)) as c:
        yield c


async def test_raw_image_is_served_whole_with_its_length(client: TestClient, mount: Path) -> None:  # type: ignore[type-arg]
    response = await client.get(
        "/volumes/disk/disk.img", headers={"x-kubevirt-export-token": TOKEN}
    )
    assert response.status == 200
    assert response.content_length == 3 * CHUNK + 12345
    assert await response.read() == (mount / "disk.img").read_bytes()


async def test_gzip_round_trips_and_is_chunked(client: TestClient, mount: Path) -> None:  # type: ignore[type-arg]
    response = await client.get(
        "/volumes/disk/disk.img.gz", headers={"x-kubevirt-export-token": TOKEN}
    )
    assert response.status == 200
    assert response.headers["Transfer-Encoding"] == "chunked"
    assert response.content_type == "application/gzip"
    body = await response.read()
    assert gzip.decompress(body) == (mount / "disk.img").read_bytes()


async def test_token_in_the_query_is_accepted(client: TestClient) -> None:  # type: ignore[type-arg]
    response = await client.get(f"/volumes/disk/disk.img?x-kubevirt-export-token={TOKEN}")
    assert response.status == 200


@pytest.mark.parametrize(
    "headers", [{}, {"x-kubevirt-export-token": "wrong"}, {"x-kubevirt-export-token": ""}]
)
async def test_missing_or_wrong_token_is_401(
    client: TestClient,  # type: ignore[type-arg]
    headers: dict[str, str],
) -> None:
    for path in ("/volumes/disk/disk.img", "/volumes/disk/disk.img.gz"):
        response = await client.get(path, headers=headers)
        assert response.status == 401, path


async def test_readiness_needs_no_token(client: TestClient) -> None:  # type: ignore[type-arg]
    response = await client.get("/exportready")
    assert response.status == 200


async def _raw_status(client: TestClient, path: str) -> int:  # type: ignore[type-arg]
    """The status for `path` sent byte for byte (an HTTP client would normalise it)."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\nx-kubevirt-export-token: {TOKEN}\r\n"
    writer.write((request + "Connection: close\r\n\r\n").encode())
    await writer.drain()
    status_line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return int(status_line.split()[1])


@pytest.mark.parametrize(
    "path",
    [
        "/volumes/disk/../disk/disk.img",
        "/volumes/disk/%2e%2e/disk/disk.img",
        "/volumes/other/disk.img",
        "/volumes/disk/disk.img/../../../etc/passwd",
        "//volumes/disk/disk.img",
        "/etc/passwd",
    ],
)
async def test_paths_other_than_the_listed_urls_are_404(
    client: TestClient,  # type: ignore[type-arg]
    path: str,
) -> None:
    assert await _raw_status(client, path) == 404
    assert await _raw_status(client, "/volumes/disk/disk.img") == 200


async def test_disk_img_symlink_out_of_the_mount_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.img"
    secret.write_bytes(b"not yours")
    mount = tmp_path / "vol"
    mount.mkdir()
    (mount / "disk.img").symlink_to(secret)
    app = build_app(
        [Volume(str(mount), "/volumes/v/disk.img", "/volumes/v/disk.img.gz")], lambda: TOKEN
    )
    async with TestClient(TestServer(app)) as c:
        response = await c.get("/volumes/v/disk.img", headers={"x-kubevirt-export-token": TOKEN})
        assert response.status == 403
        assert b"not yours" not in await response.read()


async def test_mount_point_that_is_a_symlink_is_refused(tmp_path: Path, mount: Path) -> None:
    link = tmp_path / "linked"
    link.symlink_to(mount)
    app = build_app(
        [Volume(str(link), "/volumes/v/disk.img", "/volumes/v/disk.img.gz")], lambda: TOKEN
    )
    async with TestClient(TestServer(app)) as c:
        response = await c.get("/volumes/v/disk.img", headers={"x-kubevirt-export-token": TOKEN})
        assert response.status == 403


async def test_missing_image_is_404(tmp_path: Path) -> None:
    app = build_app(
        [Volume(str(tmp_path), "/volumes/v/disk.img", "/volumes/v/disk.img.gz")], lambda: TOKEN
    )
    async with TestClient(TestServer(app)) as c:
        response = await c.get("/volumes/v/disk.img", headers={"x-kubevirt-export-token": TOKEN})
        assert response.status == 404


def test_volumes_come_from_the_controllers_environment_in_index_order() -> None:
    env = {
        "VOLUME1_EXPORT_PATH": "/export-volumes/b",
        "VOLUME1_EXPORT_RAW_URI": "/volumes/b/disk.img",
        "VOLUME1_EXPORT_RAW_GZIP_URI": "/volumes/b/disk.img.gz",
        "VOLUME0_EXPORT_PATH": "/dev/export-volumes/a",
        "VOLUME0_EXPORT_RAW_URI": "/volumes/a/disk.img",
        "VOLUME0_EXPORT_RAW_GZIP_URI": "/volumes/a/disk.img.gz",
        "HOME": "/",
    }
    volumes = volumes_from_env(env)
    assert [v.path for v in volumes] == ["/dev/export-volumes/a", "/export-volumes/b"]
    assert [v.name for v in volumes] == ["a", "b"]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "VOLUME0_EXPORT_PATH: no volume to export"),
        ({"VOLUME0_EXPORT_PATH": "/x"}, "VOLUME0_EXPORT_RAW_URI and VOLUME0_EXPORT_RAW_GZIP_URI"),
        (
            {
                "VOLUME0_EXPORT_PATH": "/x/../etc",
                "VOLUME0_EXPORT_RAW_URI": "/volumes/a/disk.img",
                "VOLUME0_EXPORT_RAW_GZIP_URI": "/volumes/a/disk.img.gz",
            },
            "VOLUME0_EXPORT_PATH: '/x/../etc' must be an absolute path",
        ),
        (
            {
                "VOLUME0_EXPORT_PATH": "/x",
                "VOLUME0_EXPORT_RAW_URI": "/volumes/../disk.img",
                "VOLUME0_EXPORT_RAW_GZIP_URI": "/volumes/a/disk.img.gz",
            },
            "VOLUME0_EXPORT_RAW_URI: '/volumes/../disk.img' is not",
        ),
    ],
)
def test_bad_environment_is_refused_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        volumes_from_env(env)
    assert str(caught.value).startswith(message)


def test_settings_need_the_cert_key_and_token_files() -> None:
    env = {
        "VOLUME0_EXPORT_PATH": "/x",
        "VOLUME0_EXPORT_RAW_URI": "/volumes/a/disk.img",
        "VOLUME0_EXPORT_RAW_GZIP_URI": "/volumes/a/disk.img.gz",
        "CERT_FILE": "/cert/tls.crt",
        "KEY_FILE": "/cert/tls.key",
    }
    with pytest.raises(ConfigError, match="TOKEN_FILE: required"):
        settings_from_env(env)
    settings = settings_from_env({**env, "TOKEN_FILE": "/token/token"})
    assert settings.port == 8443
    assert str(settings.token_file) == "/token/token"


def test_a_character_device_is_refused() -> None:
    # Only a directory holding disk.img or a block device is served.
    with pytest.raises(PermissionError, match="neither a directory nor a block device"):
        open_image(Volume("/dev/null", "/volumes/n/disk.img", "/volumes/n/disk.img.gz"))


async def test_serving_never_blocks_the_event_loop(client: TestClient, mount: Path) -> None:  # type: ignore[type-arg]
    # blockbuster raises on blocking calls (file reads, stat, open) made on the loop.
    expected = (mount / "disk.img").read_bytes()
    with blockbuster_ctx():
        headers = {"x-kubevirt-export-token": TOKEN}
        raw = await (await client.get("/volumes/disk/disk.img", headers=headers)).read()
        packed = await (await client.get("/volumes/disk/disk.img.gz", headers=headers)).read()
    assert raw == expected
    assert gzip.decompress(packed) == expected
