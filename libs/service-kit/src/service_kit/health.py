"""Liveness (/healthz) and readiness (/readyz) with registered checks.

A check is a callable returning ``True`` (healthy), ``False`` (not), a
``CheckResult`` (healthy or not, with the reason in words), or an awaitable of one; an exception or a timeout counts as unhealthy and its text is
reported. Once the service starts draining, /readyz answers 503 so traffic moves
away before the listeners close.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final

from aiohttp import web

__all__ = [
    "HEALTH_KEY",
    "Check",
    "CheckResult",
    "Health",
    "HealthReport",
    "add_health_routes",
]


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check."""

    ok: bool
    message: str = ""


Check = Callable[[], bool | CheckResult | Awaitable[bool | CheckResult]]


@dataclass(frozen=True)
class HealthReport:
    """The outcome of every check of one kind; ``ok`` when all of them passed."""

    ok: bool
    checks: Mapping[str, CheckResult]

    def to_json(self) -> dict[str, object]:
        """The body /healthz and /readyz answer with."""
        return {
            "status": "ok" if self.ok else "failed",
            "checks": {
                name: {"ok": r.ok, **({"message": r.message} if r.message else {})}
                for name, r in self.checks.items()
            },
        }


class Health:
    """The liveness and readiness checks of one process."""

    def __init__(self, check_timeout: float = 5.0) -> None:
        self._timeout = check_timeout
        self._liveness: dict[str, Check] = {}
        self._readiness: dict[str, Check] = {}
        self._draining = False

    def add_liveness_check(self, name: str, check: Check) -> None:
        """Add a check whose failure means the process should be restarted."""
        self._add(self._liveness, name, check)

    def add_readiness_check(self, name: str, check: Check) -> None:
        """Add a check whose failure means the process should get no traffic yet."""
        self._add(self._readiness, name, check)

    @staticmethod
    def _add(table: dict[str, Check], name: str, check: Check) -> None:
        if not name or name in table:
            raise ValueError(f"health check name {name!r} is empty or already registered")
        table[name] = check

    @property
    def draining(self) -> bool:
        """True once :meth:`start_draining` was called."""
        return self._draining

    def start_draining(self) -> None:
        """Make readiness fail from now on (the process is shutting down)."""
        self._draining = True

    async def liveness(self) -> HealthReport:
        """Run every liveness check concurrently."""
        return await self._run(self._liveness, draining=False)

    async def readiness(self) -> HealthReport:
        """Run every readiness check concurrently; fails while draining."""
        return await self._run(self._readiness, draining=self._draining)

    async def _run(self, table: Mapping[str, Check], *, draining: bool) -> HealthReport:
        names = list(table)
        results = await asyncio.gather(*(self._one(table[n]) for n in names))
        checks = dict(zip(names, results, strict=True))
        if draining:
            checks["shutdown"] = CheckResult(False, "the process is shutting down")
        return HealthReport(ok=all(r.ok for r in checks.values()), checks=checks)

    async def _one(self, check: Check) -> CheckResult:
        try:
            async with asyncio.timeout(self._timeout):
                outcome: object = check()
                if inspect.isawaitable(outcome):
                    outcome = await outcome
        except TimeoutError:
            return CheckResult(False, f"timed out after {self._timeout:g}s")
        except Exception as exc:  # a check's failure is data here, never a crash
            return CheckResult(False, f"{type(exc).__name__}: {exc}")
        if isinstance(outcome, CheckResult):
            return outcome
        if outcome is True:
            return CheckResult(True)
        if outcome is False:
            return CheckResult(False, "check failed")
        return CheckResult(False, f"check returned {outcome!r}, not a bool")


HEALTH_KEY: Final = web.AppKey("service_kit.health", Health)


def _respond(report: HealthReport) -> web.Response:
    return web.Response(
        status=200 if report.ok else 503,
        text=json.dumps(report.to_json()),
        content_type="application/json",
    )


def add_health_routes(
    app: web.Application,
    health: Health,
    healthz: str = "/healthz",
    readyz: str = "/readyz",
) -> None:
    """Serve ``health`` at GET ``healthz`` and ``readyz``: 200 when ok, else 503."""
    app[HEALTH_KEY] = health

    async def live(_request: web.Request) -> web.Response:
        return _respond(await health.liveness())

    async def ready(_request: web.Request) -> web.Response:
        return _respond(await health.readiness())

    app.router.add_get(healthz, live)
    app.router.add_get(readyz, ready)
