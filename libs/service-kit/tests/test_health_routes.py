"""/healthz and /readyz answer from registered checks; draining makes /readyz fail."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from service_kit import CheckResult, Health, add_health_routes


def app_with(health: Health) -> web.Application:
    app = web.Application()
    add_health_routes(app, health)
    return app


async def test_no_checks_means_healthy_and_ready() -> None:
    async with TestClient(TestServer(app_with(Health()))) as client:
        live = await client.get("/healthz")
        ready = await client.get("/readyz")
        assert (live.status, await live.json()) == (200, {"status": "ok", "checks": {}})
        assert ready.status == 200


async def test_readiness_follows_its_checks() -> None:
    synced = asyncio.Event()
    health = Health()
    health.add_readiness_check("informers-synced", synced.is_set)

    async def libvirt_connected() -> bool:
        return True

    health.add_readiness_check("libvirt", libvirt_connected)
    async with TestClient(TestServer(app_with(health))) as client:
        before = await client.get("/readyz")
        synced.set()
        after = await client.get("/readyz")
        live = await client.get("/healthz")
        assert before.status == 503
        assert await before.json() == {
            "status": "failed",
            "checks": {
                "informers-synced": {"ok": False, "message": "check failed"},
                "libvirt": {"ok": True},
            },
        }
        assert after.status == 200
        # Readiness checks do not affect liveness.
        assert live.status == 200


async def test_a_check_can_say_why_it_is_not_ready() -> None:
    health = Health()
    reason = "virtualmachines/*: not synced (ApiError: 404 Not Found)"
    health.add_readiness_check("informers", lambda: CheckResult(False, reason))

    async def leading() -> CheckResult:
        return CheckResult(True)

    health.add_readiness_check("leader", leading)
    async with TestClient(TestServer(app_with(health))) as client:
        ready = await client.get("/readyz")
        assert ready.status == 503
        assert await ready.json() == {
            "status": "failed",
            "checks": {"informers": {"ok": False, "message": reason}, "leader": {"ok": True}},
        }


async def test_failing_and_hanging_checks_are_reported_not_raised() -> None:
    health = Health(check_timeout=0.05)

    async def raises() -> bool:
        raise ConnectionRefusedError("libvirt socket refused")

    async def hangs() -> bool:
        await asyncio.Event().wait()
        return True

    health.add_liveness_check("libvirt", raises)
    health.add_liveness_check("loop", hangs)
    report = await health.liveness()
    assert not report.ok
    assert report.checks["libvirt"].message == "ConnectionRefusedError: libvirt socket refused"
    assert report.checks["loop"].message == "timed out after 0.05s"


async def test_draining_fails_readiness_but_not_liveness() -> None:
    health = Health()
    health.start_draining()
    async with TestClient(TestServer(app_with(health))) as client:
        ready = await client.get("/readyz")
        live = await client.get("/healthz")
        assert ready.status == 503
        body = await ready.json()
        assert body["checks"]["shutdown"] == {
            "ok": False,
            "message": "the process is shutting down",
        }
        assert live.status == 200


async def test_non_bool_result_is_a_failure() -> None:
    health = Health()
    health.add_readiness_check("sloppy", lambda: "yes")  # type: ignore[arg-type,return-value]
    report = await health.readiness()
    assert report.checks["sloppy"].message == "check returned 'yes', not a bool"


def test_duplicate_check_name_is_refused() -> None:
    health = Health()
    health.add_readiness_check("x", lambda: True)
    with pytest.raises(ValueError, match="already registered"):
        health.add_readiness_check("x", lambda: True)
