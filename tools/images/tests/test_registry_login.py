"""A registry that asks for a login: Basic, or a Bearer token from its token server."""

from __future__ import annotations

import base64
import io
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kv_images.registry import (
    Credentials,
    HttpRegistry,
    RegistryEndpoint,
    RegistryError,
    Request,
    parse_challenge,
    read_authfile,
)

LOGIN = Credentials("dev", "s3cret")
REALM = "https://auth.example/token"


@dataclass
class TokenServer:
    """The registry (reg.example:5000) and its token server (auth.example), in memory.

    A request to the registry passes with `Bearer tok:<scope>` for its repository's scope,
    or with Basic `LOGIN` when `basic` is set; otherwise it gets a 401 and a challenge.
    """

    basic: bool = False
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)

    def send(self, request: Request) -> tuple[int, Mapping[str, str], bytes]:
        host, path, body, headers = request.host, request.path, request.body, request.headers
        auth = headers.get("Authorization", "")
        self.seen.append((host, path, auth))
        if host == "auth.example":
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query)
            if auth != LOGIN.basic:
                return 401, {}, b"login required"
            scope = " ".join(query["scope"])
            return 200, {}, json.dumps({"token": f"tok:{scope}"}).encode()
        if body is not None and not isinstance(body, bytes):
            self.bodies.append(body.read())  # a refused upload still consumes the stream
        repo = re.sub(r"^/v2/(.+?)/(manifests|blobs)/.*$", r"\1", path)
        scope = f"repository:{repo}:pull,push"
        wanted = LOGIN.basic if self.basic else f"Bearer tok:{scope}"
        if auth == wanted:
            return 200, {"docker-content-digest": "sha256:abc"}, b""
        if self.basic:
            return 401, {"www-authenticate": 'Basic realm="reg"'}, b""
        challenge = f'Bearer realm="{REALM}",service="reg.example",scope="{scope}"'
        return 401, {"www-authenticate": challenge}, b""


def _registry(server: TokenServer, credentials: Credentials | None) -> HttpRegistry:
    return HttpRegistry(RegistryEndpoint("reg.example:5000"), credentials, transport=server.send)


def test_a_bearer_challenge_is_met_with_a_token_for_its_scope_and_reused() -> None:
    server = TokenServer()
    registry = _registry(server, LOGIN)
    assert registry.manifest_digest("kubevirt-py/virt-api", "abc") == "sha256:abc"
    token_requests = [(h, p) for h, p, _ in server.seen if h == "auth.example"]
    assert len(token_requests) == 1
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(token_requests[0][1]).query)
    assert query == {
        "service": ["reg.example"],
        "scope": ["repository:kubevirt-py/virt-api:pull,push"],
    }
    server.seen.clear()
    assert registry.has_blob("kubevirt-py/virt-api", "sha256:abc")
    assert [h for h, _, _ in server.seen] == ["reg.example"]  # the token still fits


def test_another_repository_gets_a_token_of_its_own() -> None:
    server = TokenServer()
    registry = _registry(server, LOGIN)
    registry.manifest_digest("kubevirt-py/virt-api", "abc")
    registry.manifest_digest("kubevirt-py/virt-handler", "abc")
    scopes = [p for h, p, _ in server.seen if h == "auth.example"]
    assert len(scopes) == 2
    assert "virt-handler" in scopes[1]


def test_a_token_server_that_wants_a_login_is_named_when_none_is_given() -> None:
    registry = _registry(TokenServer(), None)
    with pytest.raises(
        RegistryError, match=re.escape("token from https://auth.example/token: HTTP 401")
    ):
        registry.manifest_digest("kubevirt-py/virt-api", "abc")


def test_a_basic_challenge_without_a_login_says_how_to_give_one() -> None:
    registry = _registry(TokenServer(basic=True), None)
    with pytest.raises(RegistryError, match="--creds USER"):
        registry.manifest_digest("kubevirt-py/virt-api", "abc")


def test_an_upload_refused_for_its_login_is_sent_again_whole() -> None:
    server = TokenServer(basic=True)
    registry = _registry(server, LOGIN)
    status, _, _ = registry._request(
        "PUT", "/v2/kubevirt-py/pause/blobs/uploads/x", body=io.BytesIO(b"layer")
    )
    assert status == 200
    assert server.bodies == [b"layer", b"layer"]


def test_an_authfile_entry_for_the_registry_is_its_login(tmp_path: Path) -> None:
    auth = base64.b64encode(b"dev:s3cret").decode()
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"auths": {"reg.example:5000": {"auth": auth}}}))
    assert read_authfile(path, "reg.example:5000") == LOGIN
    assert read_authfile(path, "other.example") is None


def test_a_challenge_is_read_into_scheme_and_parameters() -> None:
    scheme, params = parse_challenge(
        'Bearer realm="https://a/token",service="r",scope="repository:x:pull repository:y:pull"'
    )
    assert scheme == "bearer"
    assert params["scope"] == "repository:x:pull repository:y:pull"
