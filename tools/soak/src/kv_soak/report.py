"""The table printed at the end of a soak: each invariant with its count and whether it
held, the faults per component, convergence, and what the run cost the API server."""

from __future__ import annotations

from kv_soak.faults import Target
from kv_soak.invariants import DUPLICATE_LAUNCHERS, DUPLICATE_QEMUS, LOST_VMS, STUCK_VMIS
from kv_soak.soak import NOT_BOOTED, NOT_CONVERGED, SoakReport

__all__ = ["render"]

_TOP_REQUESTS = 12


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _rows(report: SoakReport) -> list[tuple[str, str, str]]:
    s = report.settings
    faults = report.faults_by_target()
    rows: list[tuple[str, str, str]] = [
        ("faults injected (kill -9)", str(len(report.faults)), ""),
    ]
    rows += [(f"  {t.value}", str(faults.get(t, 0)), "") for t in Target if t in s.targets]
    held = [
        (NOT_BOOTED, NOT_BOOTED),
        (LOST_VMS, f"{LOST_VMS} (of {report.vms_checked} that should run)"),
        (DUPLICATE_LAUNCHERS, DUPLICATE_LAUNCHERS),
        (DUPLICATE_QEMUS, DUPLICATE_QEMUS),
        (STUCK_VMIS, STUCK_VMIS),
        (NOT_CONVERGED, NOT_CONVERGED),
    ]
    for invariant, label in held:
        count = report.count(invariant)
        rows.append((label, str(count), "held" if count == 0 else "BROKEN"))
    five = report.virt_api_5xx_outside_faults
    rows += [
        (
            "5xx from virt-api (no fault in progress)",
            f"{five:.0f}",
            "held" if five == 0 else "BROKEN",
        ),
        (
            "5xx from virt-api while a component was down",
            f"{report.virt_api_5xx_in_faults:.0f}",
            "",
        ),
        ("max convergence after a fault", _seconds(report.max_convergence), ""),
        ("convergence after the last fault", _seconds(report.converged_after_last_fault), ""),
        (
            "guests answering on their console",
            f"{report.consoles_answered}/{report.vms_checked}",
            "",
        ),
        ("VMs booted at the start in", _seconds(report.boot_seconds), ""),
    ]
    churn = report.churn
    rows.append(("churn actions", str(sum(churn.values())), ""))
    rows += [(f"  {a.value}", str(n), "") for a, n in sorted(churn.items())]
    failed = report.churn_failed
    if failed:
        rows.append(("actions refused or failed", str(sum(failed.values())), ""))
        rows += [(f"  {what}", str(n), "") for what, n in sorted(failed.items())]
    cost = report.cost
    minutes = max(report.seconds / 60, 1e-9)
    rows.append(
        (
            "API requests (apiserver_request_total)",
            f"{cost.total:.0f} ({cost.total / minutes:.0f}/min)",
            "",
        )
    )
    rows += [(f"  {verb}", f"{n:.0f}", "") for verb, n in cost.by_verb()]
    rows.append(("busiest verb/resource", "", ""))
    rows += [
        (f"  {verb} {resource}", f"{n:.0f}", "")
        for (verb, resource), n in cost.busiest(_TOP_REQUESTS)
    ]
    if cost.virt_api_5xx_kinds:
        rows.append(("virt-api 5xx by code and resource", "", ""))
        rows += [(f"  {k}", f"{n:.0f}", "") for k, n in sorted(cost.virt_api_5xx_kinds.items())]
    if report.injector_errors:
        rows.append(("kills the soak failed to make", str(len(report.injector_errors)), ""))
    rows.append(
        ("polls (failed while the API was down)", f"{report.polls} ({report.failed_polls})", "")
    )
    return rows


def render(report: SoakReport) -> str:
    """The whole report: a header with the seed, the table, then each violation."""
    s = report.settings
    rows = _rows(report)
    width = max(len(r[0]) for r in rows)
    value_width = max(len(r[1]) for r in rows)
    header = f"{'invariant / figure':{width}}  {'value':>{value_width}}  held"
    lines = [
        f"kv-soak: --vms {s.vms} --minutes {s.minutes:g} --seed {s.seed}"
        f" ({report.seconds / 60:.1f} min in all)",
        header,
        "-" * len(header),
    ]
    lines += [f"{a:{width}}  {b:>{value_width}}  {c}".rstrip() for a, b, c in rows]
    if report.violations:
        lines.append("")
        lines.append("violations (first sighting of each):")
        lines += [
            f"  {v.invariant}: {v.subject}: {v.detail}" for v in sorted(report.violations.values())
        ]
    if report.injector_errors:
        lines.append("")
        lines.append("kills the soak failed to make (its own errors):")
        lines += [f"  {e}" for e in report.injector_errors]
    if report.virt_api_5xx:
        lines.append("")
        lines.append("virt-api's 5xx answers while no fault was in progress:")
        lines += [f"  {answer}" for answer in report.virt_api_5xx]
    lines.append("")
    lines.append("every invariant held" if report.ok else "SOME INVARIANTS BROKE")
    return "\n".join(lines)
