"""Finding and merging kubeconfig files as kubectl does, then loading them with
kubernetes_asyncio's loader (tokens, token files, exec plugins, auth providers, client
certificates) or, when kubectl would, the pod's service account.

kubectl's rules (client-go's clientcmd) that kubernetes_asyncio's own merger does not
follow, hence the merge here: `--kubeconfig` names one file that must exist; otherwise
every existing file of `$KUBECONFIG` is read, else `~/.kube/config`; the first file that
defines a cluster, user or context by a name wins whole, and the first `current-context`
set wins; relative paths in a file are relative to that file's directory.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import aiohttp
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import ConfigException, load_incluster_config
from kubernetes_asyncio.config.kube_config import load_kube_config_from_dict

from .clock import Clock
from .errors import KubeconfigError
from .tokenfile import TokenFile

__all__ = [
    "ConfigOverrides",
    "KubeconfigError",
    "LoadedConfig",
    "impersonation_headers",
    "load_kubeconfig",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))
# Fields holding a path, per section; an exec command is a path only with a separator
# in it (a bare name is looked up on PATH), as client-go resolves them.
_PATH_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}
_DATA_FIELDS = {
    "cluster": ("certificate-authority-data",),
    "user": ("client-certificate-data", "client-key-data"),
}
# What still authenticates when an explicit token replaces the kubeconfig user's own.
_KEPT_WITH_TOKEN = (
    "client-certificate",
    "client-certificate-data",
    "client-key",
    "client-key-data",
)


@dataclass(frozen=True, slots=True)
class ConfigOverrides:
    """What kubectl's global flags override (`--kubeconfig`, `--context`, `-n`, ...)."""

    kubeconfig: str | os.PathLike[str] | None = None
    context: str | None = None
    namespace: str | None = None
    server: str | None = None
    token: str | None = None
    impersonate: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    insecure_skip_tls_verify: bool = False
    # A bearer token kept in a file (client-go's BearerTokenFile), re-read as it rotates;
    # it is the only credential sent: the kubeconfig user's own, client certificate
    # included, are dropped (else the certificate would authenticate instead).
    token_file: str | os.PathLike[str] | None = None


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """A ready Configuration plus what kubectl derives beside it."""

    configuration: Configuration
    namespace: str
    # The context used; None for the pod's service account or a bare --server.
    context: str | None
    # The kubeconfig files read, in precedence order (empty in a pod).
    sources: tuple[str, ...]
    impersonate: str | None = None
    impersonate_groups: tuple[str, ...] = field(default=())

    def api_client(self, max_connections: int | None = None) -> ApiClient:
        """A new ApiClient for this configuration, sending the impersonation headers."""
        if max_connections is not None:
            self.configuration.connection_pool_maxsize = max_connections
        client = ApiClient(self.configuration)
        _proxy_resolved_once(client)
        for name, value in impersonation_headers(self.impersonate, self.impersonate_groups).items():
            client.set_default_header(name, value)
        return client


def _environment_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (``HTTPS_PROXY``/``HTTP_PROXY``, minus
    ``NO_PROXY``), as client-go's ProxyFromEnvironment picks it; None for none."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _proxy_resolved_once(client: ApiClient) -> None:
    """Resolve the proxy from the environment now, not on every request.

    kubernetes_asyncio opens its aiohttp session with ``trust_env``, under which aiohttp
    looks up the proxy and reads ``~/.netrc`` in a worker thread for every request: two
    thread hops per API call, a quarter of virt-controller's CPU in a mass start. The
    environment is read once here instead (an explicit configuration proxy still wins),
    and the session is replaced by one on the same connector without ``trust_env``.
    """
    rest = client.rest_client
    host = client.configuration.host
    found = None if rest.proxy or not host else _environment_proxy(host)
    if found is not None:
        rest.proxy = found
    old = rest.pool_manager
    connector = old.connector
    old.detach()  # the connector (its TLS context and pool) moves to the new session
    # The read buffer kubernetes_asyncio sets: a watch event may carry an object of
    # etcd's maximum request size (1.5 MiB).
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=2**21
    )


def impersonation_headers(user: str | None, groups: tuple[str, ...] = ()) -> dict[str, str]:
    """`Impersonate-User` and `Impersonate-Group` for the API server's impersonation."""
    if groups and not user:
        raise KubeconfigError("impersonating groups needs a user to impersonate (--as)")
    if len(groups) > 1:
        # kubernetes_asyncio sends headers as a dict, one value per name, and the API
        # server reads each header line as one group (no splitting on commas).
        raise KubeconfigError("only one group can be impersonated")
    headers = {"Impersonate-User": user} if user else {}
    if groups:
        headers["Impersonate-Group"] = groups[0]
    return headers


async def load_kubeconfig(
    overrides: ConfigOverrides | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    clock: Clock | None = None,
) -> LoadedConfig:
    """Load the configuration kubectl would use with these flags.

    Token files (`overrides.token_file`, the pod's service-account token) are re-read at
    most once a minute of `clock`, off the event loop. Raises KubeconfigError (one line,
    naming the file) when it cannot be used.
    """
    overrides = overrides or ConfigOverrides()
    if overrides.token and overrides.token_file:
        raise KubeconfigError("a token and a token file: pass one of them")
    env = os.environ if environ is None else environ
    merged = await asyncio.to_thread(_read_merged, overrides.kubeconfig, env)
    name = overrides.context or merged.current_context
    if not name and not overrides.server:
        if _in_cluster_possible(env, service_account_dir):
            return await _in_cluster(overrides, env, service_account_dir, clock)
        if not merged.sources:
            raise KubeconfigError(
                "no kubeconfig (pass --kubeconfig, set KUBECONFIG or create ~/.kube/config) "
                "and not running in a pod"
            )
        raise KubeconfigError(f"kubeconfig {merged.where}: no current-context; pass --context")
    if name:
        config_dict = await asyncio.to_thread(merged.select, name, overrides)
    else:  # --server alone, as kubectl allows
        config_dict = _bare_server(str(overrides.server), overrides.token)
        name = "--server"
    if overrides.insecure_skip_tls_verify:
        cluster = config_dict["clusters"][0]["cluster"]
        for key in ("certificate-authority", "certificate-authority-data"):
            cluster.pop(key, None)
        cluster["insecure-skip-tls-verify"] = True
    configuration = Configuration()
    try:
        await load_kube_config_from_dict(
            config_dict, context=name, client_configuration=configuration
        )
    except (ConfigException, OSError, ValueError) as error:
        raise KubeconfigError(f"kubeconfig {merged.where}: context {name!r}: {error}") from None
    await asyncio.to_thread(_check_tls, configuration, merged.where, name)
    user = config_dict["users"][0]["user"] if config_dict["users"] else {}
    context = config_dict["contexts"][0]["context"]
    impersonate = overrides.impersonate or _optional_str(user.get("as"))
    groups = overrides.impersonate_groups or tuple(str(g) for g in user.get("as-groups") or ())
    impersonation_headers(impersonate, groups)  # refuse groups without a user now
    if overrides.token_file is not None:
        (await TokenFile.load(overrides.token_file, clock=clock)).install(configuration)
    return LoadedConfig(
        configuration=configuration,
        namespace=overrides.namespace or _optional_str(context.get("namespace")) or "default",
        context=None if name == "--server" else name,
        sources=merged.sources,
        impersonate=impersonate,
        impersonate_groups=groups,
    )


# -- reading and merging ------------------------------------------------------------------


@dataclass(slots=True)
class _Merged:
    sources: tuple[str, ...]
    current_context: str | None
    # name -> (file it came from, body) per section, first file wins.
    entries: dict[str, dict[str, tuple[str, dict[str, Any]]]]

    @property
    def where(self) -> str:
        return os.pathsep.join(self.sources) if self.sources else "(none)"

    def _find(self, section: str, name: str, wanted_by: str) -> tuple[str, dict[str, Any]]:
        found = self.entries[section].get(name)
        if found is None:
            raise KubeconfigError(f"kubeconfig {self.where}: {wanted_by}, which is not defined")
        return found

    def select(self, name: str, overrides: ConfigOverrides) -> dict[str, Any]:
        """A one-context kubeconfig dict for kubernetes_asyncio's loader."""
        if name not in self.entries["contexts"]:
            raise KubeconfigError(f"kubeconfig {self.where}: no context named {name!r}")
        path, context = self.entries["contexts"][name]
        cluster_name = _optional_str(context.get("cluster"))
        if not cluster_name:
            raise KubeconfigError(f"kubeconfig {path}: context {name!r} names no cluster")
        cluster_path, cluster = self._find(
            "clusters", cluster_name, f"context {name!r} names cluster {cluster_name!r}"
        )
        cluster = dict(cluster)
        if overrides.server:
            cluster["server"] = overrides.server
        if not cluster.get("server"):
            raise KubeconfigError(
                f"kubeconfig {cluster_path}: cluster {cluster_name!r} has no server"
            )
        user_name = _optional_str(context.get("user"))
        user: dict[str, Any] = {}
        user_path = path
        if user_name:
            user_path, found = self._find(
                "users", user_name, f"context {name!r} names user {user_name!r}"
            )
            user = dict(found)
        if overrides.token:
            user = {key: user[key] for key in _KEPT_WITH_TOKEN if key in user}
            user["token"] = overrides.token
        elif user.get("tokenFile") and not user.get("token"):
            user["token"] = _read_token(str(user.pop("tokenFile")), user_path, name)
        _check_material(cluster, "cluster", cluster_path, name)
        _check_material(user, "user", user_path, name)
        return {
            "current-context": name,
            "contexts": [
                {"name": name, "context": {**context, "user": "user", "cluster": "cluster"}}
            ],
            "clusters": [{"name": "cluster", "cluster": cluster}],
            "users": [{"name": "user", "user": user}],
        }


def _read_merged(explicit: str | os.PathLike[str] | None, env: Mapping[str, str]) -> _Merged:
    merged = _Merged((), None, {section: {} for section, _ in _SECTIONS})
    sources: list[str] = []
    for path in _kubeconfig_files(explicit, env):
        document = _read_file(path)
        sources.append(path)
        base = Path(path).resolve().parent
        for section, key in _SECTIONS:
            for entry in document.get(section) or []:
                entry_name = entry.get("name") if isinstance(entry, Mapping) else None
                if not isinstance(entry_name, str) or not isinstance(entry.get(key), Mapping):
                    raise KubeconfigError(
                        f"kubeconfig {path}: every entry of {section} needs a name and a {key}"
                    )
                if entry_name not in merged.entries[section]:
                    body = _absolute_paths(key, copy.deepcopy(dict(entry[key])), base)
                    merged.entries[section][entry_name] = (path, body)
        current = document.get("current-context")
        if merged.current_context is None and isinstance(current, str) and current:
            merged.current_context = current
    merged.sources = tuple(sources)
    return merged


def _kubeconfig_files(explicit: str | os.PathLike[str] | None, env: Mapping[str, str]) -> list[str]:
    if explicit is not None:
        path = os.fspath(explicit)
        if not Path(path).is_file():
            raise KubeconfigError(f"kubeconfig {path}: no such file")
        return [path]
    listed = env.get("KUBECONFIG")
    if listed:
        unique = dict.fromkeys(p for p in listed.split(os.pathsep) if p)
        # kubectl skips the files of the list that do not exist.
        return [p for p in unique if Path(p).exists()]
    default = Path(env.get("HOME") or Path.home()) / ".kube" / "config"
    return [str(default)] if default.exists() else []


def _read_file(path: str) -> Mapping[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise KubeconfigError(f"kubeconfig {path} is not UTF-8 text") from None
    except OSError as error:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {error.strerror}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise KubeconfigError(f"kubeconfig {path} is not YAML{at}: {problem}") from None
    if document is None:
        return {}  # an empty file is an empty kubeconfig, as for kubectl
    if not isinstance(document, Mapping):
        raise KubeconfigError(f"kubeconfig {path} is not a kubeconfig (not a mapping)")
    for section, _ in _SECTIONS:
        if not isinstance(document.get(section) or [], list):
            raise KubeconfigError(f"kubeconfig {path}: {section} must be a list")
    return document


def _absolute_paths(key: str, body: dict[str, Any], base: Path) -> dict[str, Any]:
    for name in _PATH_FIELDS.get(key, ()):
        value = body.get(name)
        if isinstance(value, str) and value and not os.path.isabs(value):
            body[name] = str(base / value)
    exec_config = body.get("exec") if key == "user" else None
    if isinstance(exec_config, dict):
        command = exec_config.get("command")
        if isinstance(command, str) and os.sep in command and not os.path.isabs(command):
            exec_config["command"] = str(base / command)
    return body


def _read_token(path: str, where: str, context: str) -> str:
    # Trimmed, as client-go does: a token file usually ends with a newline.
    try:
        return Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise KubeconfigError(
            f"kubeconfig {where}: tokenFile of context {context!r} is unusable: {reason}"
        ) from None


def _check_material(body: Mapping[str, Any], key: str, path: str, context: str) -> None:
    """Name the field of a missing file or of data that is not base64."""
    for name in _PATH_FIELDS[key]:
        value = body.get(name)
        if name != "tokenFile" and value and not Path(str(value)).is_file():
            raise KubeconfigError(
                f"kubeconfig {path}: {name} of context {context!r} is unusable: "
                f"no such file {value}"
            )
    for name in _DATA_FIELDS[key]:
        if body.get(name):
            try:
                base64.b64decode(str(body[name]))
            except (binascii.Error, ValueError):
                raise KubeconfigError(
                    f"kubeconfig {path}: {name} of context {context!r} is not base64"
                ) from None


def _check_tls(configuration: Configuration, where: str, context: str) -> None:
    """Fail on unusable TLS material now, naming the field, not at the first request."""
    if not str(configuration.host).startswith("https"):
        return
    field_name = "certificate-authority"
    try:
        tls = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        field_name = "client-certificate/client-key"
        if configuration.cert_file:
            tls.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    except OSError as error:  # ssl.SSLError is an OSError
        reason = error.strerror or str(error)
        raise KubeconfigError(
            f"kubeconfig {where}: {field_name} of context {context!r} is unusable: {reason}"
        ) from None


def _bare_server(server: str, token: str | None) -> dict[str, Any]:
    return {
        "current-context": "--server",
        "contexts": [{"name": "--server", "context": {"cluster": "cluster", "user": "user"}}],
        "clusters": [{"name": "cluster", "cluster": {"server": server}}],
        "users": [{"name": "user", "user": {"token": token} if token else {}}],
    }


# -- in a pod -----------------------------------------------------------------------------


def _in_cluster_possible(env: Mapping[str, str], service_account_dir: Path) -> bool:
    return bool(
        env.get("KUBERNETES_SERVICE_HOST")
        and env.get("KUBERNETES_SERVICE_PORT")
        and (service_account_dir / "token").is_file()
    )


async def _in_cluster(
    overrides: ConfigOverrides,
    env: Mapping[str, str],
    service_account_dir: Path,
    clock: Clock | None,
) -> LoadedConfig:
    configuration = Configuration()
    # It reads the token and CA files: off the loop. Its own token refresh would re-read
    # the file on the loop; TokenFile does that in a thread instead.
    await asyncio.to_thread(
        cast(Any, load_incluster_config),
        client_configuration=configuration,
        try_refresh_token=False,
        environ=dict(env),
        token_filename=str(service_account_dir / "token"),
        cert_filename=str(service_account_dir / "ca.crt"),
    )
    if overrides.token:
        configuration.api_key["BearerToken"] = f"Bearer {overrides.token}"
    else:
        token_file = overrides.token_file or service_account_dir / "token"
        (await TokenFile.load(token_file, clock=clock)).install(configuration)
    namespace = overrides.namespace or env.get("POD_NAMESPACE")
    if not namespace:
        namespace_file = service_account_dir / "namespace"
        found = await asyncio.to_thread(
            lambda: namespace_file.read_text().strip() if namespace_file.is_file() else ""
        )
        namespace = found or "default"
    impersonation_headers(overrides.impersonate, overrides.impersonate_groups)
    return LoadedConfig(
        configuration=configuration,
        namespace=namespace,
        context=None,
        sources=(),
        impersonate=overrides.impersonate,
        impersonate_groups=overrides.impersonate_groups,
    )


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
