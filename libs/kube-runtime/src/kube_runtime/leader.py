"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's algorithm.

A candidate takes the lease when it is free or its holder stopped renewing for a full
lease duration (measured on our own monotonic clock from the last change we observed, so
clock skew between nodes does not matter). The leader renews every retry period and steps
down if it cannot renew within the renew deadline; on shutdown it releases the lease.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog

from .client import KubeClient
from .clock import Clock, SystemClock, sleep_or_stop
from .errors import ApiError
from .resources import LEASES

__all__ = [
    "KubeLeaseApi",
    "LeaderElectionConfig",
    "LeaderElector",
    "LeaseApi",
    "LeaseRecord",
]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The lease fields leader election reads and writes (spec of a Lease)."""

    holder: str
    lease_duration: int
    acquire_time: dt.datetime | None
    renew_time: dt.datetime | None
    transitions: int
    resource_version: str = ""


class LeaseApi(Protocol):
    """Storage for one lease (a fake in unit tests)."""

    async def get(self) -> LeaseRecord | None:
        """The current record, or None if the lease does not exist."""
        ...

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        """Create it; raises ApiError 409 if someone else created it first."""
        ...

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """Write it if `record.resource_version` is still current; else ApiError 409."""
        ...


@dataclass(frozen=True, slots=True)
class LeaderElectionConfig:
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_stop: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("identity: must not be empty")
        if not self.lease_duration > self.renew_deadline > self.retry_period * 1.2 > 0:
            raise ValueError(
                "need lease_duration > renew_deadline > 1.2 * retry_period > 0 "
                f"(got {self.lease_duration}, {self.renew_deadline}, {self.retry_period})"
            )


OnStarted = Callable[[asyncio.Event], Awaitable[None]]


class LeaderElector:
    """Campaigns for one lease; runs `on_started_leading` only while leading."""

    def __init__(
        self,
        lease: LeaseApi,
        config: LeaderElectionConfig,
        *,
        on_started_leading: OnStarted,
        on_stopped_leading: Callable[[], None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.lease = lease
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._reported_leader: str | None = None
        self.is_leader = False

    @property
    def leader(self) -> str:
        """The holder we last observed ('' if none)."""
        return self._observed.holder if self._observed else ""

    async def run(self, stop: asyncio.Event) -> None:
        """Acquire, lead, and return when `stop` is set or leadership is lost."""
        if not await self._acquire(stop):
            return
        self.is_leader = True
        lost = asyncio.Event()
        work = asyncio.ensure_future(self.on_started_leading(lost))
        finished_itself = False
        try:
            await self._renew(stop, work)
            finished_itself = work.done()
        finally:
            self.is_leader = False
            lost.set()
            if not work.done():
                work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            # Release only on an orderly end; a cancelled elector just vanishes (like kill -9).
            if self.config.release_on_stop and (stop.is_set() or finished_itself):
                await self._release()
            if self.on_stopped_leading is not None:
                self.on_stopped_leading()

    async def _within(self, seconds: float) -> bool:
        """One acquire/renew attempt, abandoned (as failed) after `seconds` on our clock.

        A stalled API call must not keep a leader leading past its renew deadline."""
        attempt = asyncio.ensure_future(self._try_acquire_or_renew())
        timer = asyncio.ensure_future(self.clock.sleep(max(0.0, seconds)))
        try:
            await asyncio.wait({attempt, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not attempt.done():
                attempt.cancel()
            await asyncio.gather(timer, attempt, return_exceptions=True)
        if attempt.cancelled():
            log.warning("lease attempt timed out", identity=self.config.identity)
            return False
        return attempt.result()

    async def _acquire(self, stop: asyncio.Event) -> bool:
        while not stop.is_set():
            if await self._within(self.config.renew_deadline):
                log.info("acquired lease", identity=self.config.identity)
                return True
            delay = self.config.retry_period * (1.0 + 0.2 * self._rng.random())
            if await sleep_or_stop(self.clock, delay, stop):
                break
        return False

    async def _renew(self, stop: asyncio.Event, work: asyncio.Future[None]) -> None:
        cfg = self.config
        last_renew = self.clock.monotonic()
        while not stop.is_set() and not work.done():
            if await sleep_or_stop(self.clock, cfg.retry_period, stop):
                return
            started = self.clock.monotonic()
            remaining = cfg.renew_deadline - (started - last_renew)
            if await self._within(remaining):
                last_renew = started  # the renewTime we wrote is no later than this
                continue
            if self.clock.monotonic() - last_renew >= cfg.renew_deadline:
                log.warning("failed to renew lease within deadline", identity=cfg.identity)
                return

    async def _try_acquire_or_renew(self) -> bool:
        cfg = self.config
        now_wall = self.clock.now()
        try:
            current = await self.lease.get()
        except Exception as exc:
            log.warning("lease read failed", error=str(exc))
            return False
        mine = LeaseRecord(
            holder=cfg.identity,
            lease_duration=max(1, int(cfg.lease_duration)),
            acquire_time=now_wall,
            renew_time=now_wall,
            transitions=0,
        )
        if current is None:
            try:
                created = await self.lease.create(mine)
            except Exception as exc:
                log.info("lease create lost", error=str(exc))
                return False
            self._observe(created)
            return True
        self._observe(current)
        now = self.clock.monotonic()
        held_by_other = current.holder not in ("", cfg.identity)
        if held_by_other and self._observed_at + current.lease_duration > now:
            return False
        if current.holder == cfg.identity:
            record = replace(
                mine,
                acquire_time=current.acquire_time,
                transitions=current.transitions,
                resource_version=current.resource_version,
            )
        else:
            record = replace(
                mine,
                transitions=current.transitions + 1,
                resource_version=current.resource_version,
            )
        try:
            updated = await self.lease.update(record)
        except Exception as exc:
            log.info("lease update failed", error=str(exc))
            return False
        self._observe(updated)
        return True

    def _observe(self, record: LeaseRecord) -> None:
        previous = self._observed
        if previous is None or (
            previous.holder,
            previous.renew_time,
            previous.resource_version,
        ) != (
            record.holder,
            record.renew_time,
            record.resource_version,
        ):
            self._observed_at = self.clock.monotonic()
        self._observed = record
        if record.holder != self._reported_leader:
            self._reported_leader = record.holder
            if self.on_new_leader is not None and record.holder:
                self.on_new_leader(record.holder)

    async def _release(self) -> None:
        if self._observed is None or self._observed.holder != self.config.identity:
            return
        # client-go's release: empty holder, 1s duration, so a candidate takes over at once.
        record = replace(self._observed, holder="", lease_duration=1, renew_time=self.clock.now())
        try:
            async with asyncio.timeout(self.config.retry_period):
                self._observe(await self.lease.update(record))
            log.info("released lease", identity=self.config.identity)
        except Exception as exc:
            log.warning("lease release failed", error=str(exc))


class KubeLeaseApi:
    """A Lease object in the API server; writes are merge patches guarded by resourceVersion."""

    def __init__(self, client: KubeClient, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name

    async def get(self) -> LeaseRecord | None:
        try:
            body = await self.client.get(LEASES, self.name, self.namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return _record_from(body)

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": _spec_from(record),
        }
        return _record_from(await self.client.create(LEASES, body, self.namespace))

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        if not record.resource_version:
            raise ValueError("update needs the resourceVersion it was read at")
        patch = {
            "metadata": {"resourceVersion": record.resource_version},
            "spec": _spec_from(record),
        }
        return _record_from(await self.client.merge_patch(LEASES, self.name, patch, self.namespace))


def _micro(t: dt.datetime | None) -> str | None:
    if t is None:
        return None
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_micro(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _spec_from(record: LeaseRecord) -> dict[str, Any]:
    return {
        "holderIdentity": record.holder or None,
        "leaseDurationSeconds": record.lease_duration,
        "acquireTime": _micro(record.acquire_time),
        "renewTime": _micro(record.renew_time),
        "leaseTransitions": record.transitions,
    }


def _record_from(body: Any) -> LeaseRecord:
    spec = body.get("spec") or {}
    meta = body.get("metadata") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=_parse_micro(spec.get("acquireTime")),
        renew_time=_parse_micro(spec.get("renewTime")),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=str(meta.get("resourceVersion") or ""),
    )
