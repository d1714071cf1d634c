"""Kubeconfig loading follows kubectl: which files, how they merge, overrides, in-cluster."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from kube_runtime import (
    CONFIGMAPS,
    ConfigOverrides,
    KubeClient,
    KubeconfigError,
    load_kubeconfig,
)


def write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def cluster(name: str, server: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "cluster": {"server": server, **fields}}


def context(name: str, cluster_name: str, user: str | None = None, **fields: Any) -> dict[str, Any]:
    body = {"cluster": cluster_name, **fields}
    if user:
        body["user"] = user
    return {"name": name, "context": body}


async def bearer(overrides: ConfigOverrides, **kwargs: Any) -> tuple[str | None, Any, str]:
    loaded = await load_kubeconfig(overrides, **kwargs)
    return (
        loaded.configuration.host,
        loaded.configuration.api_key.get("BearerToken"),
        loaded.namespace,
    )


async def test_kubeconfig_list_merges_first_file_wins(tmp_path: Path) -> None:
    first = write(
        tmp_path / "a",
        {
            "current-context": "a",
            "contexts": [context("a", "shared", "alice", namespace="team-a")],
            "users": [{"name": "alice", "user": {"token": "from-a"}}],
        },
    )
    second = write(
        tmp_path / "b",
        {
            "current-context": "b",  # loses: the first current-context set wins
            "clusters": [cluster("shared", "http://127.0.0.1:1")],
            "contexts": [context("a", "other"), context("b", "shared", "alice")],
            "users": [{"name": "alice", "user": {"token": "from-b"}}],
        },
    )
    missing = tmp_path / "missing"  # kubectl skips list entries that do not exist
    env = {"KUBECONFIG": os.pathsep.join(map(str, (first, missing, second)))}
    loaded = await load_kubeconfig(environ=env)
    assert loaded.context == "a"
    assert loaded.sources == (str(first), str(second))
    assert loaded.configuration.host == "http://127.0.0.1:1"
    assert loaded.configuration.api_key["BearerToken"] == "Bearer from-a"
    assert loaded.namespace == "team-a"
    assert await bearer(ConfigOverrides(context="b"), environ=env) == (
        "http://127.0.0.1:1",
        "Bearer from-a",
        "default",
    )


async def test_relative_paths_are_relative_to_the_file_that_holds_them(tmp_path: Path) -> None:
    (tmp_path / "users" / "token").parent.mkdir(parents=True)
    (tmp_path / "users" / "token").write_text("file-token\n")
    main = write(
        tmp_path / "main" / "config",
        {"current-context": "c", "contexts": [context("c", "k", "u")]},
    )
    users = write(
        tmp_path / "users" / "config",
        {
            "clusters": [cluster("k", "http://127.0.0.1:1")],
            "users": [{"name": "u", "user": {"tokenFile": "token"}}],
        },
    )
    env = {"KUBECONFIG": f"{main}{os.pathsep}{users}"}
    assert (await bearer(ConfigOverrides(), environ=env))[1] == "Bearer file-token"


async def test_exec_plugin_gives_the_token(tmp_path: Path) -> None:
    plugin = tmp_path / "bin" / "credential"
    plugin.parent.mkdir()
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "exec-token"},
    }
    plugin.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(credential))})\n")
    plugin.chmod(0o755)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "bin/credential"}}
    config = write(
        tmp_path / "config",
        {
            "current-context": "c",
            "clusters": [cluster("k", "http://127.0.0.1:1")],
            "contexts": [context("c", "k", "u")],
            "users": [{"name": "u", "user": user}],
        },
    )
    loaded = await load_kubeconfig(ConfigOverrides(kubeconfig=config), environ={})
    assert loaded.configuration.api_key["BearerToken"] == "Bearer exec-token"


async def test_server_token_namespace_and_impersonation_override(tmp_path: Path) -> None:
    config = write(
        tmp_path / "config",
        {
            "current-context": "c",
            "clusters": [cluster("k", "http://127.0.0.1:1")],
            "contexts": [context("c", "k", "u", namespace="ctx-ns")],
            "users": [{"name": "u", "user": {"token": "mine", "as": "kube-as"}}],
        },
    )
    overrides = ConfigOverrides(
        kubeconfig=config,
        server="http://127.0.0.1:2",
        token="flag-token",
        namespace="flag-ns",
        impersonate="jane",
        impersonate_groups=("dev",),
    )
    loaded = await load_kubeconfig(overrides, environ={})
    assert (loaded.configuration.host, loaded.namespace) == ("http://127.0.0.1:2", "flag-ns")
    assert loaded.configuration.api_key["BearerToken"] == "Bearer flag-token"
    assert (loaded.impersonate, loaded.impersonate_groups) == ("jane", ("dev",))
    kubeconfig_as = await load_kubeconfig(ConfigOverrides(kubeconfig=config), environ={})
    assert kubeconfig_as.impersonate == "kube-as"


async def test_server_alone_needs_no_kubeconfig(tmp_path: Path) -> None:
    overrides = ConfigOverrides(server="http://127.0.0.1:3", token="t")
    loaded = await load_kubeconfig(overrides, environ={"HOME": str(tmp_path)})
    assert (loaded.configuration.host, loaded.context, loaded.namespace) == (
        "http://127.0.0.1:3",
        None,
        "default",
    )


async def test_in_cluster_when_there_is_no_kubeconfig(tmp_path: Path) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("sa-token")
    (account / "ca.crt").write_text("not read until the first request")
    (account / "namespace").write_text("kubevirt\n")
    env = {
        "HOME": str(tmp_path),
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
    }
    loaded = await load_kubeconfig(environ=env, service_account_dir=account)
    assert loaded.configuration.host == "https://10.0.0.1:443"
    assert loaded.namespace == "kubevirt"
    # A kubeconfig, when there is one, wins over the pod's account, as for kubectl.
    write(
        tmp_path / ".kube" / "config",
        {
            "current-context": "c",
            "clusters": [cluster("k", "http://127.0.0.1:1")],
            "contexts": [context("c", "k")],
        },
    )
    assert (await load_kubeconfig(environ=env, service_account_dir=account)).context == "c"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"clusters: [\n", "is not YAML at line 2"),
        (b"- just\n- a list\n", "is not a kubeconfig"),
        (b"\xff\xfe", "is not UTF-8 text"),
        (b"clusters: {a: 1}\n", "clusters must be a list"),
        (b"current-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n", "cluster 'k'"),
        (b"current-context: nowhere\n", "no context named 'nowhere'"),
        (b"contexts: []\n", "no current-context; pass --context"),
    ],
)
async def test_unusable_kubeconfig_is_one_line_naming_the_file(
    tmp_path: Path, content: bytes, said: str
) -> None:
    path = tmp_path / "config"
    path.write_bytes(content)
    with pytest.raises(KubeconfigError) as raised:
        await load_kubeconfig(ConfigOverrides(kubeconfig=path), environ={})
    message = str(raised.value)
    assert said in message
    assert str(path) in message
    assert "\n" not in message


async def test_missing_explicit_kubeconfig_and_no_config_at_all(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=f"kubeconfig {tmp_path}/nope: no such file"):
        await load_kubeconfig(ConfigOverrides(kubeconfig=tmp_path / "nope"), environ={})
    with pytest.raises(KubeconfigError, match=r"no kubeconfig .* not running in a pod"):
        await load_kubeconfig(environ={"HOME": str(tmp_path)}, service_account_dir=tmp_path)


@pytest.mark.parametrize(
    ("user", "groups", "said"),
    [(None, ("dev",), "needs a user to impersonate"), ("jane", ("a", "b"), "only one group")],
)
async def test_impersonation_that_cannot_be_sent_is_refused(
    tmp_path: Path, user: str | None, groups: tuple[str, ...], said: str
) -> None:
    overrides = ConfigOverrides(
        server="http://127.0.0.1:1", impersonate=user, impersonate_groups=groups
    )
    with pytest.raises(KubeconfigError, match=said):
        await load_kubeconfig(overrides, environ={"HOME": str(tmp_path)})


@pytest.fixture
async def echo() -> AsyncIterator[tuple[list[web.Request], str]]:
    seen: list[web.Request] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        if request.path.endswith("/console"):
            ws = web.WebSocketResponse(protocols=("binary.kubevirt.io",))
            await ws.prepare(request)
            await ws.send_bytes(b"login:")
            await ws.close()
            return ws
        return web.json_response({"metadata": {"name": "x"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield seen, f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def test_client_sends_impersonation_on_requests_and_websockets(
    echo: tuple[list[web.Request], str], tmp_path: Path
) -> None:
    seen, server = echo
    overrides = ConfigOverrides(
        server=server, token="t", impersonate="jane", impersonate_groups=("dev",)
    )
    loaded = await load_kubeconfig(overrides, environ={"HOME": str(tmp_path)})
    async with KubeClient.from_config(loaded) as client:
        await client.get(CONFIGMAPS, "x", "ns")
        ws = await client.websocket("/apis/x/console", protocols=("binary.kubevirt.io",))
        assert (await ws.receive_bytes()) == b"login:"
        await ws.close()
    for request in seen:
        assert request.headers["Authorization"] == "Bearer t"
        assert request.headers.getall("Impersonate-User") == ["jane"]
        assert request.headers.getall("Impersonate-Group") == ["dev"]


async def test_the_proxy_comes_from_the_environment_once_not_per_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp's trust_env would look the proxy (and ~/.netrc) up in a thread per request.
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    monkeypatch.setenv("NO_PROXY", "10.0.0.1")
    via_proxy = ConfigOverrides(server="https://api.test:6443", token="t")
    direct = ConfigOverrides(server="https://10.0.0.1:6443", token="t")
    for overrides, proxy in ((via_proxy, "http://proxy.test:3128"), (direct, None)):
        loaded = await load_kubeconfig(overrides, environ={"HOME": str(tmp_path)})
        client = loaded.api_client()
        try:
            assert client.rest_client.proxy == proxy
            assert client.rest_client.pool_manager.trust_env is False
        finally:
            await client.close()
