"""One bounded soak run: boot N VMs, churn them and kill components for a given time,
check the invariants on every poll, then settle, restore and check again at the end.

Everything the run touches comes through seams (Observer, VmActions, Injector,
ConsoleProbe, MetricsSource) and time through a kube_runtime Clock, so the loop runs in
unit tests on fakes and a fake clock. Randomness comes from one seeded generator.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol, TextIO

from kube_runtime import Clock, sleep_or_stop
from kubevirt_api.enums import RunStrategy

from kv_soak.apicost import ApiCost, parse_counters
from kv_soak.churn import (
    VIRT_API_ACTIONS,
    Action,
    ActionError,
    ChurnScheduler,
    Pick,
    VmActions,
)
from kv_soak.faults import Fault, FaultPicker, Injector, NoTargetError, Target
from kv_soak.invariants import (
    Debounce,
    Violation,
    duplicate_launchers,
    duplicate_qemus,
    lost_vms,
    should_run,
    steady,
    stuck_vmis,
    unsettled,
)
from kv_soak.model import Snapshot

__all__ = [
    "NOT_CONVERGED",
    "ConsoleProbe",
    "MetricsSource",
    "Observer",
    "Soak",
    "SoakReport",
    "SoakSettings",
    "vm_names",
]

NOT_CONVERGED = "faults not converged"
NOT_BOOTED = "VMs not booted before the faults"


class Observer(Protocol):
    async def snapshot(self) -> Snapshot:
        """The VMs, VMIs, launcher pods and QEMUs now; raises when the API cannot answer."""
        ...


class ConsoleProbe(Protocol):
    async def answers(self, name: str, within: float) -> bool:
        """True when the guest of VM `name` answers a command typed on its serial console."""
        ...


class MetricsSource(Protocol):
    async def apiserver_metrics(self) -> str:
        """The API server's /metrics text; raises when it cannot be read."""
        ...


@dataclass(frozen=True)
class SoakSettings:
    vms: int
    minutes: float
    seed: int
    targets: tuple[Target, ...] = tuple(Target)
    migrations: bool = True
    #: At most this many faults (None: as many as fit in the time).
    max_faults: int | None = None
    poll_interval: float = 1.0
    #: Seconds between churn actions; None: one action per VM per minute, at least every 2 s.
    churn_interval: float | None = None
    #: A VM is left alone this long after each action.
    churn_settle: float = 20.0
    #: Quiet time before each fault, drawn uniformly from this range.
    fault_gap: tuple[float, float] = (10.0, 40.0)
    boot_timeout: float = 600.0
    recover_timeout: float = 180.0
    converge_timeout: float = 300.0
    settle_timeout: float = 420.0
    console_timeout: float = 90.0
    console_parallel: int = 2
    metrics_interval: float = 10.0
    #: After a component is back, 5xx still count as caused by its fault for this long.
    fault_grace: float = 10.0

    def __post_init__(self) -> None:
        if self.vms < 1 or self.minutes <= 0:
            raise ValueError("--vms must be >= 1 and --minutes > 0")
        if self.fault_gap[0] < 0 or self.fault_gap[1] < self.fault_gap[0]:
            raise ValueError("the fault gap must be a range of seconds, low <= high")

    @property
    def interval(self) -> float:
        if self.churn_interval is not None:
            return self.churn_interval
        return max(2.0, 60.0 / self.vms)


def vm_names(count: int) -> list[str]:
    return [f"soak-{index:03d}" for index in range(count)]


@dataclass
class SoakReport:
    settings: SoakSettings
    faults: list[Fault] = field(default_factory=list)
    violations: dict[tuple[str, str], Violation] = field(default_factory=dict)
    churn: Counter[Action] = field(default_factory=Counter)
    churn_failed: Counter[str] = field(default_factory=Counter)
    cost: ApiCost = field(default_factory=ApiCost)
    polls: int = 0
    failed_polls: int = 0
    boot_seconds: float | None = None
    #: From the last fault's kill until every VM was steady again with the churn stopped.
    converged_after_last_fault: float | None = None
    unsettled_at_end: tuple[str, ...] = ()
    vms_checked: int = 0
    #: Kills the soak could not make (its own failure, not the cluster's).
    injector_errors: list[str] = field(default_factory=list)
    #: virt-api's 5xx answers to the soak's own calls (its webhooks' are in `cost`):
    #: while nothing was down (each described), and how many while something was.
    virt_api_5xx: list[str] = field(default_factory=list)
    virt_api_5xx_during_faults: int = 0
    consoles_answered: int = 0
    seconds: float = 0.0

    def violate(self, violation: Violation) -> bool:
        """Keep the first sighting of each (invariant, subject); True when new."""
        key = (violation.invariant, violation.subject)
        if key in self.violations:
            return False
        self.violations[key] = violation
        return True

    def count(self, invariant: str) -> int:
        return sum(1 for v in self.violations.values() if v.invariant == invariant)

    @property
    def ok(self) -> bool:
        return not self.violations and self.virt_api_5xx_outside_faults == 0

    @property
    def virt_api_5xx_outside_faults(self) -> float:
        return len(self.virt_api_5xx) + self.cost.virt_api_5xx

    @property
    def virt_api_5xx_in_faults(self) -> float:
        return self.virt_api_5xx_during_faults + self.cost.virt_api_5xx_during_faults

    def faults_by_target(self) -> Counter[Target]:
        return Counter(f.kill.target for f in self.faults)

    @property
    def max_convergence(self) -> float | None:
        times = [f.converged_after for f in self.faults if f.converged_after is not None]
        return max(times) if times else None


class Soak:
    """Runs the soak once; `run()` returns the report (the caller prints it)."""

    def __init__(
        self,
        settings: SoakSettings,
        *,
        clock: Clock,
        observer: Observer,
        actions: VmActions,
        injector: Injector,
        console: ConsoleProbe,
        metrics: MetricsSource,
        progress: TextIO = sys.stderr,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.rng = random.Random(settings.seed)
        self.observer = observer
        self.actions = actions
        self.injector = injector
        self.console = console
        self.metrics = metrics
        self.progress = progress
        self.names = vm_names(settings.vms)
        self.scheduler = ChurnScheduler(
            self.rng, self.names, settle=settings.churn_settle, migrations=settings.migrations
        )
        self.picker = FaultPicker(self.rng, settings.targets)
        self.report = SoakReport(settings)
        self.latest: Snapshot | None = None
        self._qemu_debounce = Debounce()
        #: [kill, back + grace] of each fault; the end is None while it is down.
        self._windows: list[list[float | None]] = []
        self._started = 0.0
        self._answers: dict[str, bool] = {}

    # -- the run --------------------------------------------------------------------------

    async def run(self) -> SoakReport:
        s = self.settings
        self._started = self.clock.monotonic()
        self._say(
            f"seed {s.seed}: {s.vms} VMs, {s.minutes:g} min of churn every {s.interval:g}s and "
            f"faults ({', '.join(t.value for t in s.targets)}), replay with --seed {s.seed}"
        )
        done = asyncio.Event()
        background = [
            asyncio.ensure_future(self._watch(done)),
            asyncio.ensure_future(self._sample_metrics(done)),
        ]
        try:
            await self._boot()
            deadline = self.clock.monotonic() + s.minutes * 60
            await asyncio.gather(self._churn(deadline), self._inject(deadline))
            await self._settle()
            await self._restore()
            await self._check_consoles()
            await self._final_checks()
            await self._sample_once(during_fault=False)
        finally:
            done.set()
            await asyncio.gather(*background, return_exceptions=True)
        self.report.seconds = self.clock.monotonic() - self._started
        return self.report

    async def _boot(self) -> None:
        for name in self.names:
            strategy = (
                RunStrategy.RERUN_ON_FAILURE if self.rng.random() < 0.25 else RunStrategy.ALWAYS
            )
            await self._act(Pick(name, Action.CREATE, strategy), churn=False)
        started = self.clock.monotonic()
        left = await self._wait_steady(self.names, self.settings.boot_timeout)
        if left:
            for name in left:
                self._violate(Violation(NOT_BOOTED, name, "not Running before the churn began"))
        else:
            self.report.boot_seconds = self.clock.monotonic() - started
            self._say(f"{len(self.names)} VMs running after {self.report.boot_seconds:.0f}s")

    async def _churn(self, deadline: float) -> None:
        while await self._sleep_before(deadline, self.settings.interval):
            snapshot = self._fresh()
            if snapshot is None:
                continue
            now = self.clock.monotonic()
            pick = self.scheduler.pick(snapshot, now)
            if pick is not None:
                self.scheduler.touched(pick.name, now)
                await self._act(pick)

    async def _inject(self, deadline: float) -> None:
        s = self.settings
        while s.max_faults is None or len(self.report.faults) < s.max_faults:
            if not await self._sleep_before(deadline, self.rng.uniform(*s.fault_gap)):
                return
            target = self.picker.next()
            before = self._fresh()
            candidates = [n for n in self.names if before is not None and steady(before, n)]
            try:
                kill = await self.injector.kill(target, self.rng)
            except NoTargetError as error:
                self._say(f"no {target.value} to kill: {error}")
                continue
            except Exception as error:  # a bug of the injector must not cost the whole run
                self.report.injector_errors.append(f"{target.value}: {error!r}")
                self._say(f"killing {target.value} failed: {error!r}")
                continue
            fault = Fault(kill, self.clock.monotonic())
            window: list[float | None] = [fault.at, None]
            self._windows.append(window)
            self.report.faults.append(fault)
            if kill.vm is not None:
                candidates = sorted({*candidates, kill.vm})
            self._say(f"fault {len(self.report.faults)}: kill -9 {kill.what} (pid {kill.pid})")
            fault.not_back = await self.injector.recover(kill, s.recover_timeout)
            now = self.clock.monotonic()
            window[1] = now + s.fault_grace
            back = fault.not_back is None
            fault.recovered_after = now - fault.at if back else None
            await self._converge(fault, candidates)
            self._say(
                f"fault {len(self.report.faults)}: {kill.target.value} "
                + (
                    f"back after {fault.recovered_after:.1f}s"
                    if back
                    else f"NOT back ({fault.not_back})"
                )
                + (
                    f", its VMs steady after {fault.converged_after:.1f}s"
                    if fault.converged_after is not None
                    else f", not converged ({', '.join(fault.unconverged) or 'component down'})"
                )
            )

    async def _converge(self, fault: Fault, candidates: list[str]) -> None:
        """Wait until the VMs that were steady at the kill (and not churned since) are
        steady again, with the component back; record how long it took."""
        give_up = fault.at + self.settings.converge_timeout
        back_at = self.clock.monotonic()
        pending = candidates
        while True:
            snapshot = self.latest
            if snapshot is not None and snapshot.monotonic >= back_at:
                pending = [
                    n
                    for n in candidates
                    if not steady(snapshot, n) and not self.scheduler.touched_since(n, fault.at)
                ]
                if not pending and fault.recovered_after is not None:
                    fault.converged_after = snapshot.monotonic - fault.at
                    return
            if self.clock.monotonic() >= give_up:
                fault.unconverged = tuple(pending)
                self._violate(
                    Violation(
                        NOT_CONVERGED,
                        f"fault {len(self.report.faults)} ({fault.kill.what})",
                        f"after {self.settings.converge_timeout:g}s: "
                        + (
                            f"not steady: {', '.join(pending)}"
                            if pending
                            else f"{fault.kill.target.value} not back: {fault.not_back}"
                        ),
                    )
                )
                return
            await self.clock.sleep(self.settings.poll_interval)

    async def _settle(self) -> None:
        """Churn and faults stopped: unpause what is paused, then wait for every VM to be
        steady; the time since the last fault is the run's final convergence."""
        snapshot = await self._poll_until_fresh()
        for name in self.names:
            vmi = snapshot.vmis.get(name) if snapshot else None
            if vmi is not None and vmi.paused:
                await self._act(Pick(name, Action.UNPAUSE), churn=False)
        left = await self._wait_steady(self.names, self.settings.settle_timeout)
        self.report.unsettled_at_end = tuple(left)
        if self.report.faults and not left:
            last = self.report.faults[-1].at
            self.report.converged_after_last_fault = self.clock.monotonic() - last
        self._say(
            "settled"
            + (
                f", {self.report.converged_after_last_fault:.0f}s after the last fault"
                if self.report.converged_after_last_fault is not None
                else ""
            )
            + (f"; not steady: {', '.join(left)}" if left else "")
        )

    async def _restore(self) -> None:
        """Bring every VM back to running (create the deleted, start the halted), so the
        final check covers all N."""
        snapshot = await self._poll_until_fresh()
        if snapshot is None:
            return
        for name in self.names:
            vm = snapshot.vms.get(name)
            if vm is None:
                await self._act(Pick(name, Action.CREATE), churn=False)
            elif vm.run_strategy == RunStrategy.HALTED:
                await self._act(Pick(name, Action.START), churn=False)
        await self._wait_steady(self.names, self.settings.settle_timeout)

    async def _check_consoles(self) -> None:
        snapshot = await self._poll_until_fresh()
        if snapshot is None:
            return
        wanted = [n for n, vm in snapshot.vms.items() if should_run(vm.run_strategy)]
        gate = asyncio.Semaphore(max(1, self.settings.console_parallel))

        async def probe(name: str) -> tuple[str, bool]:
            async with gate:
                try:
                    return name, await self.console.answers(name, self.settings.console_timeout)
                except OSError as error:
                    self._say(f"console of {name}: {error!r}")
                    return name, False

        results = await asyncio.gather(*(probe(n) for n in sorted(wanted)))
        self._answers = dict(results)
        self.report.vms_checked = len(wanted)
        self.report.consoles_answered = sum(1 for _, ok in results if ok)
        self._say(f"{self.report.consoles_answered}/{len(wanted)} guests answered on the console")

    async def _final_checks(self) -> None:
        snapshot = await self._poll_until_fresh()
        if snapshot is None:
            self._violate(Violation("final check", "cluster", "the API did not answer"))
            return
        for violation in [
            *lost_vms(snapshot, self._answers),
            *stuck_vmis(snapshot),
            *duplicate_launchers(snapshot),
        ]:
            self._violate(violation)

    # -- background -----------------------------------------------------------------------

    async def _watch(self, done: asyncio.Event) -> None:
        while not done.is_set():
            await self._poll()
            await sleep_or_stop(self.clock, self.settings.poll_interval, done)

    async def _poll(self) -> Snapshot | None:
        self.report.polls += 1
        try:
            snapshot = await self.observer.snapshot()
        except Exception:
            self.report.failed_polls += 1
            return None
        self.latest = snapshot
        for violation in [
            *duplicate_launchers(snapshot),
            *self._qemu_debounce(duplicate_qemus(snapshot)),
        ]:
            self._violate(violation)
        return snapshot

    async def _sample_metrics(self, done: asyncio.Event) -> None:
        last = self.clock.monotonic()
        while not done.is_set():
            await self._sample_once(during_fault=self._during_fault(last, self.clock.monotonic()))
            last = self.clock.monotonic()
            await sleep_or_stop(self.clock, self.settings.metrics_interval, done)

    async def _sample_once(self, *, during_fault: bool) -> None:
        try:
            text = await self.metrics.apiserver_metrics()
        except Exception:
            return
        sample = await asyncio.to_thread(parse_counters, text)
        self.report.cost.add(sample, during_fault=during_fault)

    # -- helpers --------------------------------------------------------------------------

    def _during_fault(self, start: float, end: float) -> bool:
        return any(
            w[0] is not None and w[0] <= end and (w[1] is None or w[1] >= start)
            for w in self._windows
        )

    async def _act(self, pick: Pick, *, churn: bool = True) -> None:
        started = self.clock.monotonic()
        try:
            await self.actions.act(pick.name, pick.action, pick.run_strategy)
        except ActionError as error:
            self.report.churn_failed[f"{pick.action.value} {error.status or 'error'}"] += 1
            if pick.action in VIRT_API_ACTIONS and (error.status or 0) >= 500:
                if self._during_fault(started, self.clock.monotonic()):
                    self.report.virt_api_5xx_during_faults += 1
                else:
                    self.report.virt_api_5xx.append(
                        f"{error.status} {pick.action.value} {pick.name}: {error}"
                    )
            if churn:
                self._say(f"churn: {pick.action.value} {pick.name} failed: {error}")
            return
        if churn:
            self.report.churn[pick.action] += 1

    async def _wait_steady(self, names: list[str], within: float) -> list[str]:
        give_up = self.clock.monotonic() + within
        left = list(names)
        while True:
            snapshot = await self._poll()
            if snapshot is not None:
                left = unsettled(snapshot, names)
                if not left:
                    return []
            if self.clock.monotonic() >= give_up:
                return left
            await self.clock.sleep(self.settings.poll_interval)

    async def _poll_until_fresh(self, attempts: int = 60) -> Snapshot | None:
        for _ in range(attempts):
            snapshot = await self._poll()
            if snapshot is not None:
                return snapshot
            await self.clock.sleep(self.settings.poll_interval)
        return None

    def _fresh(self) -> Snapshot | None:
        """The latest snapshot unless the API has not answered for a few polls."""
        snapshot = self.latest
        if snapshot is None:
            return None
        if self.clock.monotonic() - snapshot.monotonic > 3 * self.settings.poll_interval:
            return None
        return snapshot

    async def _sleep_before(self, deadline: float, seconds: float) -> bool:
        """Sleep `seconds` unless that passes `deadline`; False once the deadline is reached."""
        now = self.clock.monotonic()
        if now >= deadline:
            return False
        await self.clock.sleep(min(seconds, deadline - now))
        return self.clock.monotonic() < deadline

    def _violate(self, violation: Violation) -> None:
        if self.report.violate(violation):
            self._say(f"VIOLATION {violation.invariant}: {violation.subject}: {violation.detail}")

    def _say(self, message: str) -> None:
        elapsed = self.clock.monotonic() - self._started
        minutes, seconds = divmod(int(elapsed), 60)
        print(f"kv-soak [{minutes:02d}:{seconds:02d}] {message}", file=self.progress, flush=True)
