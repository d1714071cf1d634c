"""The files of one cluster inside its state directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["StateLayout"]


@dataclass(frozen=True)
class StateLayout:
    """Paths under the state dir. Every component gets `data/<name>`, `logs/<name>.log`
    and `run/<name>.json`; a node module adds its own names the same way.

    ```
    <root>/config.json        the settings the cluster was created with
    <root>/hostnet.json       host routes/addresses this cluster added (removed by down)
    <root>/pki/               CA, certificates, keys (0600)
    <root>/kubeconfig/        admin.conf and one per component
    <root>/data/<component>/  e.g. data/etcd
    <root>/logs/<component>.log
    <root>/run/<component>.json  pid + start time of each process we started
    ```
    """

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def hostnet(self) -> Path:
        return self.root / "hostnet.json"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def kubeconfigs(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.kubeconfigs / "admin.conf"

    def kubeconfig(self, user: str) -> Path:
        """The kubeconfig file of one client identity (e.g. `controller-manager`)."""
        return self.kubeconfigs / f"{user}.conf"

    def data(self, component: str) -> Path:
        return self.root / "data" / component

    def log(self, component: str) -> Path:
        return self.root / "logs" / f"{component}.log"

    def pidfile(self, component: str) -> Path:
        return self.root / "run" / f"{component}.json"

    def create(self) -> None:
        """Make the directories (private to the user: they hold keys)."""
        for sub in (self.root, self.pki, self.kubeconfigs, self.root / "logs", self.root / "run"):
            sub.mkdir(parents=True, exist_ok=True)
            sub.chmod(0o700)
