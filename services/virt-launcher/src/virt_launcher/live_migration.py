"""The launcher's two migration roles, wired once: source (Migrate, CancelMigration) and
target (PrepareMigrationTarget, FinalizeMigration), over the one domain manager."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from virt_domain.launcher_pod import MIGRATION_PROXY_DIR, PUBLIC

from virt_launcher.conversion import DomainBuilder
from virt_launcher.domain_manager import DomainManager
from virt_launcher.migration_source import MigrationSource
from virt_launcher.migration_target import MigrationTarget

__all__ = ["DEFAULT_PROXY_DIR", "LiveMigration"]

#: ``/var/run/kubevirt/migrationproxy``: the same path in every launcher pod.
DEFAULT_PROXY_DIR = posixpath.join(PUBLIC.mount_path, MIGRATION_PROXY_DIR)


@dataclass(frozen=True)
class LiveMigration:
    """What the Cmd service needs to migrate: both roles and the target's domain builder."""

    source: MigrationSource
    target: MigrationTarget
    target_builder: DomainBuilder

    @classmethod
    def create(
        cls,
        manager: DomainManager,
        target_builder: DomainBuilder,
        ephemeral_disk_dir: str,
        qemu_owner: tuple[int, int] | None,
        proxy_dir: str = DEFAULT_PROXY_DIR,
    ) -> LiveMigration:
        """Both roles for ``manager``'s domain, with the proxy sockets in ``proxy_dir``."""
        return cls(
            source=MigrationSource(manager, proxy_dir, ephemeral_disk_dir),
            target=MigrationTarget(manager, proxy_dir, qemu_owner),
            target_builder=target_builder,
        )

    async def close(self) -> None:
        """Stop both roles' background work."""
        await self.source.close()
        await self.target.close()
