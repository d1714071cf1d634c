"""Expectations: what a controller has asked for but not yet seen in its informers.

A controller records the creations and deletions it issues per key and does not act on
that key again until the informer has shown them (or they expired), so a slow watch
never makes it create twice. After a restart the informers' initial list is the truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kube_runtime import Clock, SystemClock

__all__ = ["EXPECTATION_TTL", "Expectations"]

# As upstream: an expectation not observed within 5 minutes is given up.
EXPECTATION_TTL = 300.0


@dataclass
class _Pending:
    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    since: float = 0.0


class Expectations:
    """Per-key counts of pending creations and uids of pending deletions."""

    def __init__(self, clock: Clock | None = None, ttl: float = EXPECTATION_TTL) -> None:
        self.clock = clock or SystemClock()
        self.ttl = ttl
        self._pending: dict[str, _Pending] = {}

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for `key` (or what was pending has expired)."""
        pending = self._pending.get(key)
        if pending is None:
            return True
        if pending.adds <= 0 and not pending.deletes:
            return True
        if self.clock.monotonic() - pending.since > self.ttl:
            del self._pending[key]
            return True
        return False

    def _entry(self, key: str) -> _Pending:
        pending = self._pending.get(key)
        if pending is None or (pending.adds <= 0 and not pending.deletes):
            pending = self._pending[key] = _Pending(since=self.clock.monotonic())
        return pending

    def expect_creations(self, key: str, count: int) -> None:
        self._entry(key).adds += count

    def creation_observed(self, key: str) -> None:
        pending = self._pending.get(key)
        if pending is not None and pending.adds > 0:
            pending.adds -= 1

    def expect_deletions(self, key: str, uids: list[str]) -> None:
        self._entry(key).deletes.update(uids)

    def deletion_observed(self, key: str, uid: str) -> None:
        pending = self._pending.get(key)
        if pending is not None:
            pending.deletes.discard(uid)

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)
