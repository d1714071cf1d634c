"""Push built images to an OCI registry (distribution API v2), skipping what it already has.

An image's archive (buildah's docker-archive) already names its config and layers by their
sha256, and its layers are uncompressed tars, so the OCI manifest we push is known before
anything is sent: the layers go as `application/vnd.oci.image.layer.v1.tar` (digest =
diffID, no recompression), and the manifest is serialised deterministically. Pushing is:

1. the manifest under the content tag has the digest we would push → nothing to do;
2. else each blob the repository lacks (HEAD) is mounted from a repository of this push
   that has it, or uploaded (POST, then one monolithic PUT); then the manifest (PUT).

Aliases (`:devel`, `:latest`, the upstream examples' names) are the same manifest under
other tags, PUT only where the tag points elsewhere. The registry verifies every digest on
upload, so a mislabelled archive fails loudly rather than being stored under a wrong name.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import ssl
import tarfile
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from kv_images.host import HostError
from kv_images.progress import Progress

__all__ = [
    "ENDPOINT_FILE",
    "MANIFEST_MEDIA_TYPE",
    "ArchiveImage",
    "Blob",
    "Credentials",
    "HttpRegistry",
    "PushResult",
    "Pusher",
    "RegistryApi",
    "RegistryEndpoint",
    "RegistryError",
    "Request",
    "Response",
    "Transport",
    "local_registry",
    "parse_challenge",
    "read_archive",
    "read_authfile",
    "split_ref",
]

MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar"
# Where a local cluster's registry says where it listens and which CA signed it, relative
# to the cluster's state dir (kv-cluster writes it while the registry runs).
ENDPOINT_FILE = Path("data/registry/endpoint.json")
_ACCEPT = ", ".join(
    (
        MANIFEST_MEDIA_TYPE,
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
)


class RegistryError(HostError):
    """The registry refused a request or could not be reached; the message says which."""


@dataclass(frozen=True)
class Blob:
    """A config or layer inside an archive: its digest, size and tar member name."""

    digest: str
    size: int
    member: str
    media_type: str


@dataclass(frozen=True)
class ArchiveImage:
    """What one docker-archive holds, as an OCI image: blobs and the manifest's bytes."""

    archive: Path
    config: Blob
    layers: tuple[Blob, ...]

    @property
    def blobs(self) -> tuple[Blob, ...]:
        return (*self.layers, self.config)

    @property
    def manifest(self) -> bytes:
        """The OCI manifest, serialised deterministically (its digest names the image)."""
        body = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": _descriptor(self.config),
            "layers": [_descriptor(layer) for layer in self.layers],
        }
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.manifest).hexdigest()


def _descriptor(blob: Blob) -> dict[str, object]:
    return {"mediaType": blob.media_type, "digest": blob.digest, "size": blob.size}


def _member_digest(name: str, suffix: str) -> str:
    stem = name.removesuffix(suffix)
    if (
        not name.endswith(suffix)
        or len(stem) != 64
        or any(c not in "0123456789abcdef" for c in stem)
    ):
        raise RegistryError(f"archive member {name!r} is not named by its sha256 digest")
    return f"sha256:{stem}"


def read_archive(archive: Path) -> ArchiveImage:
    """Read the docker-archive `archive` (one image) written by `buildah push docker-archive:`."""
    try:
        with tarfile.open(archive) as tar:
            handle = tar.extractfile("manifest.json")
            if handle is None:
                raise RegistryError(f"{archive}: manifest.json is not a file")
            [entry] = json.loads(handle.read())
            sizes = {m.name: m.size for m in tar.getmembers() if m.isfile()}
    except (OSError, tarfile.TarError, KeyError, ValueError) as exc:
        raise RegistryError(f"cannot read image archive {archive}: {exc}") from None
    config_name = str(entry["Config"])
    config = Blob(
        _member_digest(config_name, ".json"), sizes[config_name], config_name, CONFIG_MEDIA_TYPE
    )
    layers = tuple(
        Blob(_member_digest(str(name), ".tar"), sizes[str(name)], str(name), LAYER_MEDIA_TYPE)
        for name in entry["Layers"]
    )
    return ArchiveImage(archive, config, layers)


def split_ref(ref: str) -> tuple[str, str]:
    """`(repository path in the registry, tag)` of a reference, its registry host dropped.

    `docker.io/kubevirt-py/pause:abc` → (`kubevirt-py/pause`, `abc`); `registry:5000/kubevirt/x:devel`
    → (`kubevirt/x`, `devel`). The first component is a host when it has a `.` or `:` or is
    `localhost` (Docker's rule), which is how a mirror of docker.io sees the path too.
    """
    name, sep, tag = ref.rpartition(":")
    if not sep or "/" in tag:
        name, tag = ref, "latest"
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        name = rest
    return name, tag


@dataclass(frozen=True)
class RegistryEndpoint:
    """Where a registry is (`host[:port]`) and how its TLS is checked.

    `ca`: a PEM bundle to trust (kv-cluster's CA for the local registry); `cert_dir`: a dir
    whose `*.crt` files are trusted (as buildah's `--cert-dir`); `tls_verify=False` trusts
    any certificate (never for the local registry).
    """

    address: str
    ca: Path | None = None
    cert_dir: Path | None = None
    tls_verify: bool = True

    def ssl_context(self) -> ssl.SSLContext:
        if not self.tls_verify:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx
        ctx = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        if self.cert_dir is not None:
            for crt in sorted(self.cert_dir.glob("*.crt")):
                ctx.load_verify_locations(cafile=str(crt))
        return ctx

    def save(self, path: Path) -> None:
        """Write the endpoint (address and CA) as JSON, atomically."""
        body = {"address": self.address, "ca": str(self.ca) if self.ca else None}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(body, indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> RegistryEndpoint | None:
        """The endpoint `save` wrote, or None when there is none (or it is unreadable)."""
        try:
            raw = json.loads(path.read_text())
            ca = raw.get("ca")
            return cls(str(raw["address"]), Path(ca) if ca else None)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    @property
    def host_port(self) -> tuple[str, int]:
        host, sep, port = self.address.rpartition(":")
        if not sep or not port.isdigit():
            return self.address, 443
        return host, int(port)


def local_registry(state_dir: Path) -> RegistryEndpoint | None:
    """The registry of the local cluster in `state_dir` while it runs (kv-cluster's record)."""
    return RegistryEndpoint.load(state_dir / ENDPOINT_FILE)


@dataclass(frozen=True)
class Credentials:
    """A login for a registry that asks for one (Basic, or Basic to its token server)."""

    username: str
    password: str = field(repr=False)

    @property
    def basic(self) -> str:
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


def read_authfile(path: Path, address: str) -> Credentials | None:
    """The login for `address` in a containers auth.json / docker config.json (`auths`)."""
    try:
        auths = json.loads(path.read_text()).get("auths", {})
    except (OSError, ValueError, AttributeError) as exc:
        raise RegistryError(f"cannot read auth file {path}: {exc}") from None
    for key in (address, f"https://{address}", f"https://{address}/v2/"):
        entry = auths.get(key)
        if isinstance(entry, dict) and entry.get("auth"):
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            return Credentials(user, password)
    return None


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """`WWW-Authenticate: Bearer realm="…",service="…",scope="…"` → ("bearer", {…})."""
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), dict(re.findall(r'([A-Za-z_]+)="([^"]*)"', rest))


class RegistryApi(Protocol):
    """The registry calls a push makes (a fake in tests, HttpRegistry for real)."""

    def manifest_digest(self, repo: str, tag: str) -> str | None:
        """The digest `repo:tag` points at, or None when the tag does not exist."""
        ...

    def has_blob(self, repo: str, digest: str) -> bool: ...

    def mount_blob(self, repo: str, digest: str, source: str) -> bool:
        """Link a blob from repository `source`; False when the registry did not."""
        ...

    def upload_blob(self, repo: str, digest: str, size: int, data: IO[bytes]) -> None: ...

    def put_manifest(self, repo: str, tag: str, media_type: str, body: bytes) -> None: ...


@dataclass(frozen=True)
class Request:
    """One HTTPS request to `host:port` (the registry, or its token server)."""

    host: str
    port: int
    method: str
    path: str
    body: bytes | IO[bytes] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


#: status, headers (lower-case names), body
Response = tuple[int, Mapping[str, str], bytes]
Transport = Callable[[Request], Response]


@dataclass
class HttpRegistry:
    """The distribution API v2 over HTTPS. The local registry asks for no login; another may
    answer 401 with a Basic or a Bearer (token server) challenge, met with `credentials`
    (or anonymously, for a token server that hands out anonymous tokens)."""

    endpoint: RegistryEndpoint
    credentials: Credentials | None = None
    timeout: float = 120.0
    #: Sends one request; HTTPS with the endpoint's trust unless a test passes its own.
    transport: Transport | None = None
    _ssl: ssl.SSLContext | None = field(default=None, init=False, repr=False)
    # The Authorization header that last worked; a 401 (another repository's scope) renews it.
    _authorization: str | None = field(default=None, init=False, repr=False)

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = self.endpoint.ssl_context()
        return self._ssl

    def _send(self, request: Request) -> Response:
        if self.transport is not None:
            return self.transport(request)
        conn = http.client.HTTPSConnection(
            request.host, request.port, timeout=self.timeout, context=self._context()
        )
        try:
            conn.request(
                request.method, request.path, body=request.body, headers=dict(request.headers)
            )
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
        except (OSError, http.client.HTTPException) as exc:
            raise RegistryError(
                f"registry {self.endpoint.address}: {request.method} "
                f"{request.host}:{request.port}{request.path} failed: {type(exc).__name__}: {exc}"
            ) from None
        finally:
            conn.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | IO[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        host, port = self.endpoint.host_port
        sent = dict(headers or {})
        if self._authorization:
            sent["Authorization"] = self._authorization
        status, got, data = self._send(Request(host, port, method, path, body, sent))
        challenge = got.get("www-authenticate")
        if status != 401 or not challenge:
            return status, got, data
        self._authorization = self._answer(challenge)
        if not isinstance(body, bytes | None):
            body.seek(0)  # a blob's tar member: send it again from its start
        login = {**sent, "Authorization": self._authorization}
        return self._send(Request(host, port, method, path, body, login))

    def _answer(self, challenge: str) -> str:
        """The Authorization header that meets a 401's WWW-Authenticate challenge."""
        scheme, params = parse_challenge(challenge)
        if scheme == "basic":
            if self.credentials is None:
                raise RegistryError(
                    f"registry {self.endpoint.address} asks for a login "
                    "(kv-images push --creds USER[:PASSWORD] or --authfile FILE)"
                )
            return self.credentials.basic
        if scheme != "bearer" or "realm" not in params:
            raise RegistryError(
                f"registry {self.endpoint.address}: unsupported challenge {challenge!r}"
            )
        realm = urllib.parse.urlsplit(params["realm"])
        if realm.scheme != "https" or not realm.hostname:
            raise RegistryError(
                f"registry {self.endpoint.address}: token realm {params['realm']!r} is not https"
            )
        query = [("service", params["service"])] if "service" in params else []
        query += [("scope", scope) for scope in params.get("scope", "").split()]
        joined = "&".join(q for q in (realm.query, urllib.parse.urlencode(query)) if q)
        path = (realm.path or "/") + (f"?{joined}" if joined else "")
        login = {"Authorization": self.credentials.basic} if self.credentials else {}
        status, _, data = self._send(
            Request(realm.hostname, realm.port or 443, "GET", path, headers=login)
        )
        if status != 200:
            raise self._fail(f"token from {params['realm']}", status, data)
        try:
            token = json.loads(data)
            value = token.get("token") or token.get("access_token")
        except (ValueError, AttributeError):
            value = None
        if not isinstance(value, str) or not value:
            raise RegistryError(f"registry {self.endpoint.address}: the token server sent no token")
        return f"Bearer {value}"

    def _fail(self, what: str, status: int, data: bytes) -> RegistryError:
        refused = " (the login was refused)" if status == 401 and self.credentials else ""
        return RegistryError(
            f"registry {self.endpoint.address}: {what}: HTTP {status}{refused} "
            f"{data.decode('utf-8', 'replace').strip()[:300]}"
        )

    def ping(self) -> None:
        """GET /v2/; raises RegistryError unless the registry answers 200."""
        status, _, data = self._request("GET", "/v2/")
        if status != 200:
            raise self._fail("GET /v2/", status, data)

    def manifest_digest(self, repo: str, tag: str) -> str | None:
        status, headers, data = self._request(
            "HEAD", f"/v2/{repo}/manifests/{tag}", headers={"Accept": _ACCEPT}
        )
        if status == 404:
            return None
        if status != 200:
            raise self._fail(f"HEAD manifest {repo}:{tag}", status, data)
        return headers.get("docker-content-digest")

    def has_blob(self, repo: str, digest: str) -> bool:
        status, _, data = self._request("HEAD", f"/v2/{repo}/blobs/{digest}")
        if status not in (200, 404):
            raise self._fail(f"HEAD blob {repo}@{digest}", status, data)
        return status == 200

    def mount_blob(self, repo: str, digest: str, source: str) -> bool:
        query = urllib.parse.urlencode({"mount": digest, "from": source})
        status, headers, data = self._request(
            "POST", f"/v2/{repo}/blobs/uploads/?{query}", headers={"Content-Length": "0"}
        )
        if status == 201:
            return True
        if status == 202:  # not mounted; an upload session was opened instead: drop it
            location = headers.get("location")
            if location:
                self._request("DELETE", self._path(location))
            return False
        raise self._fail(f"mount {digest} into {repo}", status, data)

    def upload_blob(self, repo: str, digest: str, size: int, data: IO[bytes]) -> None:
        status, headers, body = self._request(
            "POST", f"/v2/{repo}/blobs/uploads/", headers={"Content-Length": "0"}
        )
        location = headers.get("location")
        if status != 202 or not location:
            raise self._fail(f"start upload to {repo}", status, body)
        path = self._path(location)
        sep = "&" if "?" in path else "?"
        status, _, body = self._request(
            "PUT",
            f"{path}{sep}{urllib.parse.urlencode({'digest': digest})}",
            body=data,
            headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
        )
        if status != 201:
            raise self._fail(f"upload {digest} to {repo}", status, body)

    def put_manifest(self, repo: str, tag: str, media_type: str, body: bytes) -> None:
        status, _, data = self._request(
            "PUT", f"/v2/{repo}/manifests/{tag}", body=body, headers={"Content-Type": media_type}
        )
        if status != 201:
            raise self._fail(f"PUT manifest {repo}:{tag}", status, data)

    def _path(self, location: str) -> str:
        """An upload Location (absolute or relative) as a path on this endpoint."""
        parsed = urllib.parse.urlsplit(location)
        return parsed.path + (f"?{parsed.query}" if parsed.query else "")


@dataclass(frozen=True)
class PushResult:
    """What one push did: the image's manifest digest and whether anything was sent."""

    ref: str
    digest: str
    pushed: bool
    blobs_sent: int
    tags_set: tuple[str, ...]


class Pusher:
    """Pushes archives to one registry; remembers which repository holds which blob."""

    def __init__(self, registry: RegistryApi, progress: Progress) -> None:
        self.registry = registry
        self.progress = progress
        self._holders: dict[str, str] = {}

    def push(self, name: str, archive: Path, ref: str, aliases: Iterable[str] = ()) -> PushResult:
        """Make `ref` (and each alias) point at the image in `archive`; send only what is missing."""
        image = read_archive(archive)
        repo, tag = split_ref(ref)
        digest = image.digest
        sent = 0
        pushed = self.registry.manifest_digest(repo, tag) != digest
        if pushed:
            for blob in image.blobs:
                if self._ensure_blob(repo, blob, image):
                    sent += 1
            self.registry.put_manifest(repo, tag, MANIFEST_MEDIA_TYPE, image.manifest)
        else:
            for blob in image.blobs:
                self._holders.setdefault(blob.digest, repo)
        tags = [ref] if pushed else []
        for alias in aliases:
            alias_repo, alias_tag = split_ref(alias)
            if self.registry.manifest_digest(alias_repo, alias_tag) == digest:
                continue
            if alias_repo != repo:
                for blob in image.blobs:
                    self._ensure_blob(alias_repo, blob, image)
            self.registry.put_manifest(alias_repo, alias_tag, MANIFEST_MEDIA_TYPE, image.manifest)
            tags.append(alias)
        return PushResult(ref, digest, pushed, sent, tuple(tags))

    def _ensure_blob(self, repo: str, blob: Blob, image: ArchiveImage) -> bool:
        """Make `repo` hold `blob`; True when its bytes were sent."""
        holder = self._holders.get(blob.digest)
        if holder == repo or self.registry.has_blob(repo, blob.digest):
            self._holders.setdefault(blob.digest, repo)
            return False
        if holder is not None and self.registry.mount_blob(repo, blob.digest, holder):
            return False
        with tarfile.open(image.archive) as tar:
            data = tar.extractfile(blob.member)
            if data is None:
                raise RegistryError(f"{image.archive}: {blob.member} is not a file")
            self.registry.upload_blob(repo, blob.digest, blob.size, data)
        self._holders[blob.digest] = repo
        return True
