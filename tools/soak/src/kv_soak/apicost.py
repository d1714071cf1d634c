"""What the run cost the API server, and the 5xx answers that came from virt-api.

The API server's /metrics is sampled every few seconds. Its counters start again at zero
when the soak kills kube-apiserver, so growth is summed sample by sample as Prometheus'
`increase()` does: a counter that went down restarted, and its new value is all growth.
Each sample's growth of 5xx answers from virt-api (its webhooks and the
subresources.kubevirt.io group the API server proxies to it) is put on one of two
accounts: during a fault (some component was down) or not.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["ApiCost", "CounterSample", "parse_counters"]

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} ([0-9.eE+-]+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_WANTED = ("apiserver_request_total", "apiserver_admission_webhook_request_total")
_VIRT_API_GROUP = "subresources.kubevirt.io"
_VIRT_API_WEBHOOK = ".kubevirt.io"

Labels = tuple[tuple[str, str], ...]
CounterSample = dict[tuple[str, Labels], float]


def parse_counters(text: str, names: Iterable[str] = _WANTED) -> CounterSample:
    """The series of the counters `names` in a Prometheus text exposition."""
    wanted = tuple(names)
    found: CounterSample = {}
    for line in text.splitlines():
        if not line.startswith(wanted):
            continue
        match = _SAMPLE.match(line)
        if match is None or match.group(1) not in wanted:
            continue
        labels = tuple(sorted(_LABEL.findall(match.group(2))))
        found[(match.group(1), labels)] = float(match.group(3))
    return found


def _is_virt_api_5xx(name: str, labels: Mapping[str, str]) -> bool:
    if not labels.get("code", "").startswith("5"):
        return False
    if name == "apiserver_request_total":
        return labels.get("group") == _VIRT_API_GROUP
    return labels.get("name", "").endswith(_VIRT_API_WEBHOOK)


@dataclass
class ApiCost:
    """Growth of the API server's request counters across the run."""

    #: Requests by (verb, resource) (resource with its subresource, group-qualified when
    #: not core), summed across API server restarts.
    requests: defaultdict[tuple[str, str], float] = field(
        default_factory=lambda: defaultdict(float)
    )
    #: 5xx answers from virt-api while nothing was down, and while something was.
    virt_api_5xx: float = 0.0
    virt_api_5xx_during_faults: float = 0.0
    #: What those 5xx were (same key as requests, or the webhook's name).
    virt_api_5xx_kinds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    samples: int = 0
    _last: CounterSample | None = None

    def add(self, sample: CounterSample, *, during_fault: bool) -> None:
        """Account one sample's growth over the previous one."""
        self.samples += 1
        last, self._last = self._last, sample
        if last is None:
            return
        for key, value in sample.items():
            before = last.get(key, 0.0)
            grown = value - before if value >= before else value
            if grown <= 0:
                continue
            name, raw = key
            labels = dict(raw)
            if name == "apiserver_request_total":
                self.requests[(labels.get("verb", ""), _resource(labels))] += grown
            if _is_virt_api_5xx(name, labels):
                kind = _resource(labels) if name == "apiserver_request_total" else labels["name"]
                self.virt_api_5xx_kinds[f"{labels['code']} {kind}"] += grown
                if during_fault:
                    self.virt_api_5xx_during_faults += grown
                else:
                    self.virt_api_5xx += grown

    @property
    def total(self) -> float:
        return sum(self.requests.values())

    def by_verb(self) -> list[tuple[str, float]]:
        """Requests per verb, most first."""
        verbs: defaultdict[str, float] = defaultdict(float)
        for (verb, _), count in self.requests.items():
            verbs[verb] += count
        return sorted(verbs.items(), key=lambda kv: (-kv[1], kv[0]))

    def busiest(self, count: int) -> list[tuple[tuple[str, str], float]]:
        """The `count` (verb, resource) pairs with the most requests."""
        return sorted(self.requests.items(), key=lambda kv: (-kv[1], kv[0]))[:count]


def _resource(labels: Mapping[str, str]) -> str:
    resource = labels.get("resource", "") or "(none)"
    if labels.get("subresource"):
        resource += "/" + labels["subresource"]
    group = labels.get("group", "")
    return f"{resource}.{group}" if group else resource
