"""KubeVirt's PrometheusRule `prometheus-kubevirt-rules`: upstream's recording rules and
alerts for the components kubevirt-py has (virt-api, virt-controller, virt-handler), with
upstream's names, expressions, durations, labels, severities and runbook URLs.

Upstream builds them in `pkg/monitoring/rules/` (kubevirt/kubevirt d923fdb8). Left out on
purpose: virt-operator's alerts (no operator serves its metrics yet; its recording rules
are in, so they read 0), the system and VM alerts that need metrics nothing here emits
(guest load, memory pressure, OS panics, deprecated-API counts, KVM node counts).
`python -m kubevirt_api.monitoring.manifests` writes the rule into manifests/monitoring/.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "PROMETHEUS_RULE_NAME",
    "RUNBOOK_URL_TEMPLATE",
    "Alert",
    "RecordingRule",
    "alerts",
    "prometheus_rule",
    "recording_rules",
    "rule_groups",
]

PROMETHEUS_RULE_NAME: Final = "prometheus-kubevirt-rules"
RUNBOOK_URL_TEMPLATE: Final = "https://kubevirt.io/monitoring/runbooks/{}"


@dataclass(frozen=True)
class RecordingRule:
    record: str
    expr: str
    help: str


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    severity: str
    health_impact: str
    summary: str
    duration: str | None = None
    description: str | None = None
    #: Component alerts carry the install namespace as a label; VM alerts do not.
    component: bool = True
    extra_labels: dict[str, str] = field(default_factory=dict)


def _up(ns: str, component: str) -> str:
    return f"sum(up{{namespace='{ns}', pod=~'virt-{component}-.*'}}) or vector(0)"


# Upstream's running and ready counts read kube-state-metrics only; without it they are
# always 0 and the Down/NoReady alerts fire whether or not the component runs. Where no
# kube_* series answers, these fall back to Prometheus' own scrape targets (the scrape
# configuration keeps running pods only): with kube-state-metrics they are upstream's.
def _running(ns: str, component: str) -> str:
    pods = f"pod=~'virt-{component}-.*', namespace='{ns}'"
    return (
        f"count(kube_pod_status_phase{{{pods}, phase='Running'}} == 1) "
        f"or count(up{{{pods}}}) or vector(0)"
    )


def _ready(ns: str, component: str) -> str:
    pods = f"pod=~'virt-{component}-.*', namespace='{ns}'"
    metric = f"kubevirt_virt_{component}_ready_status{{namespace='{ns}'}}"
    return (
        f"sum(kube_pod_status_ready{{{pods}, condition='true'}} * on(pod, namespace) {metric}) "
        f"or sum(up{{{pods}}} * on(pod, namespace) {metric}) or vector(0)"
    )


_COMPONENTS = ("api", "controller", "operator", "handler")


def recording_rules(namespace: str) -> list[RecordingRule]:
    """upstream's `virt.go` recording rules (up, pods running, ready, leading)."""
    rules = [
        RecordingRule(
            f"cluster:kubevirt_virt_{c}_up:sum",
            _up(namespace, c),
            f"The number of virt-{c} pods that are up.",
        )
        for c in _COMPONENTS
    ]
    rules += [
        RecordingRule(
            f"cluster:kubevirt_virt_{c}_pods_running:count",
            _running(namespace, c),
            f"The number of virt-{c} pods that are running.",
        )
        for c in _COMPONENTS
    ]
    rules += [
        RecordingRule(
            f"cluster:kubevirt_virt_{c}_ready:sum",
            _ready(namespace, c),
            f"The number of virt-{c} pods that are ready.",
        )
        for c in ("api", "controller", "operator", "handler")
    ]
    rules += [
        RecordingRule(
            f"cluster:kubevirt_virt_{c}_leading:sum",
            f"sum(kubevirt_virt_{c}_leading_status{{namespace='{namespace}'}}) or vector(0)",
            f"The number of virt-{c} pods that are leading.",
        )
        for c in ("controller", "operator")
    ]
    return rules


def _error_ratio(ns: str, pod: str) -> str:
    codes = "(4|5)[0-9][0-9]"
    return (
        f'sum ( rate ( kubevirt_rest_client_requests_total{{namespace="{ns}",pod=~"{pod}-.*",'
        f'code=~"{codes}"}} [5m] ) )  /  sum ( rate ( kubevirt_rest_client_requests_total'
        f'{{namespace="{ns}",pod=~"{pod}-.*"}} [5m] ) )'
    )


def _rest_burst(ns: str, component: str, name: str) -> Alert:
    return Alert(
        name,
        _error_ratio(ns, component) + " >= 0.8",
        "critical",
        "critical",
        f"More than 80% of the rest calls failed in {component} for the last 5 minutes",
        "5m",
    )


def _down(component: str, name: str, summary: str) -> Alert:
    return Alert(
        name,
        f"cluster:kubevirt_virt_{component}_pods_running:count == 0",
        "critical",
        "critical",
        summary,
        "10m",
    )


def _low_ready(component: str, name: str, summary: str) -> Alert:
    ready = f"cluster:kubevirt_virt_{component}_ready:sum"
    expr = f"{ready} < cluster:kubevirt_virt_{component}_pods_running:count and {ready} > 0"
    return Alert(name, expr, "warning", "warning", summary, "10m")


def _no_ready(component: str, name: str, summary: str) -> Alert:
    expr = f"cluster:kubevirt_virt_{component}_ready:sum == 0"
    return Alert(name, expr, "critical", "critical", summary, "10m")


def _low_count(ns: str, component: str, name: str, summary: str, duration: str) -> Alert:
    expr = (
        f"cluster:kubevirt_virt_{component}_pods_running:count / on() "
        f"kube_deployment_spec_replicas{{deployment='virt-{component}', namespace='{ns}'}} < 0.75"
    )
    return Alert(name, expr, "warning", "warning", summary, duration)


def alerts(namespace: str) -> list[Alert]:
    """The alerts of virt-api, virt-controller and virt-handler, and the VM alert whose
    metric virt-controller emits, in upstream's order."""
    ns = namespace
    return [
        # virt-api.go
        _down("api", "VirtAPIDown", "No running virt-api pods were detected for the last 10 min."),
        _low_ready("api", "LowReadyVirtAPICount", "Some virt-api pods are running but not ready."),
        _no_ready("api", "NoReadyVirtAPI", "No ready virt-api was detected for the last 10 min."),
        _low_count(
            ns,
            "api",
            "LowVirtAPICount",
            "Less than 75% of desired virt-api pods are running.",
            "60m",
        ),
        _rest_burst(ns, "virt-api", "VirtApiRESTErrorsBurst"),
        # virt-controller.go
        _low_ready(
            "controller",
            "LowReadyVirtControllersCount",
            "Some virt controllers are running but not ready.",
        ),
        _no_ready(
            "controller",
            "NoReadyVirtController",
            "No ready virt-controller was detected for the last 10 min.",
        ),
        Alert(
            "NoLeadingVirtController",
            "cluster:kubevirt_virt_controller_leading:sum == 0",
            "critical",
            "critical",
            "No leading virt-controller was detected for the last 10 min.",
            "10m",
        ),
        _down(
            "controller",
            "VirtControllerDown",
            "No running virt-controller was detected for the last 10 min.",
        ),
        _low_count(
            ns,
            "controller",
            "LowVirtControllersCount",
            "Less than 75% of desired virt-controller pods are running.",
            "10m",
        ),
        Alert(
            "VirtLauncherPodsStuckFailed",
            "sum(kube_pod_status_phase{phase='Failed', pod=~'virt-launcher-.*'}) >= 200",
            "critical",
            "critical",
            "At least 200 virt-launcher pods are stuck in Failed state and not deleted for "
            "10 minutes.",
            "10m",
        ),
        _rest_burst(ns, "virt-controller", "VirtControllerRESTErrorsBurst"),
        # virt-handler.go
        _down(
            "handler",
            "VirtHandlerDown",
            "No running virt-handler pods were detected for the last 10 min.",
        ),
        _low_ready(
            "handler", "LowReadyVirtHandlerCount", "Some virt-handlers are running but not ready."
        ),
        _no_ready(
            "handler",
            "NoReadyVirtHandler",
            "No ready virt-handler was detected for the last 10 min.",
        ),
        Alert(
            "OrphanedVirtualMachineInstances",
            "(((max by (node) (kube_pod_status_ready{condition='true',pod=~'virt-handler.*'} "
            "* on(pod) group_left(node) max by(pod,node)(kube_pod_info{pod=~'virt-handler.*',"
            "node!=''})) ) == 1) or (count by (node)( kube_pod_info{pod=~'virt-launcher.*',"
            "node!=''})*0)) == 0",
            "warning",
            "warning",
            "No ready virt-handler pod detected on node {{ $labels.node }} with running vmis "
            "for more than 10 minutes",
            "10m",
        ),
        Alert(
            "VirtHandlerDaemonSetRolloutFailing",
            f"(kube_daemonset_status_number_ready{{namespace='{ns}', daemonset='virt-handler'}}"
            " - kube_daemonset_status_desired_number_scheduled"
            f"{{namespace='{ns}', daemonset='virt-handler'}}) != 0",
            "warning",
            "warning",
            "Some virt-handlers failed to roll out",
            "15m",
        ),
        _rest_burst(ns, "virt-handler", "VirtHandlerRESTErrorsBurst"),
        # vms.go
        Alert(
            "OutdatedVirtualMachineInstanceWorkloads",
            "kubevirt_vmi_number_of_outdated{namespace!=''} != 0",
            "warning",
            "none",
            "Some running VMIs are still active in outdated pods after KubeVirt control plane "
            "update has completed.",
            "24h",
            component=False,
        ),
    ]


def _alert_rule(alert: Alert, namespace: str) -> dict[str, Any]:
    labels = {
        "severity": alert.severity,
        "operator_health_impact": alert.health_impact,
        "kubernetes_operator_part_of": "kubevirt",
        "kubernetes_operator_component": "kubevirt",
        **alert.extra_labels,
    }
    if alert.component:
        labels["namespace"] = namespace
    annotations = {"summary": alert.summary}
    if alert.description is not None:
        annotations["description"] = alert.description
    annotations["runbook_url"] = RUNBOOK_URL_TEMPLATE.format(alert.name)
    rule: dict[str, Any] = {"alert": alert.name, "expr": alert.expr}
    if alert.duration is not None:
        rule["for"] = alert.duration
    rule["annotations"] = dict(sorted(annotations.items()))
    rule["labels"] = dict(sorted(labels.items()))
    return rule


def rule_groups(namespace: str) -> list[dict[str, Any]]:
    """The rule file's groups, as upstream names them (also a `promtool` rule file)."""
    return [
        {
            "name": "recordingRules.rules",
            "rules": [{"record": r.record, "expr": r.expr} for r in recording_rules(namespace)],
        },
        {"name": "alerts.rules", "rules": [_alert_rule(a, namespace) for a in alerts(namespace)]},
    ]


def prometheus_rule(namespace: str) -> dict[str, Any]:
    """The monitoring.coreos.com/v1 PrometheusRule object upstream's operator deploys."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": PROMETHEUS_RULE_NAME,
            "namespace": namespace,
            "labels": {"prometheus.kubevirt.io": "true", "k8s-app": "kubevirt"},
        },
        "spec": {"groups": rule_groups(namespace)},
    }
