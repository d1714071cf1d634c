"""The cgroup the node's pods live under: nested in the cgroup this tool runs in, never `/`.

On this host (cgroup v1) the caller sits in a non-root memory cgroup; pods placed at the
root would escape the machine's memory accounting. kubelet takes one `cgroupRoot` path for
every controller, so that path is created (and later removed) in each v1 hierarchy; only
directories created here are ever removed.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

__all__ = ["CgroupError", "CgroupRoot", "own_cgroup"]

_CGROUP_FS = Path("/sys/fs/cgroup")
# Values a new cpuset cgroup must get before tasks may join it (v1 does not inherit them).
_CPUSET_FILES = ("cpuset.cpus", "cpuset.mems")


class CgroupError(RuntimeError):
    """The cgroup layout is not usable; the message says what was found."""


def own_cgroup(proc_cgroup: str | None = None) -> str:
    """The path of this process's memory cgroup (v1), e.g. `/process_api/abc`."""
    text = proc_cgroup if proc_cgroup is not None else Path("/proc/self/cgroup").read_text()
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
    for line in text.splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0" and controllers == "":
            return path
    raise CgroupError("cannot find this process's memory cgroup in /proc/self/cgroup")


class CgroupRoot:
    """`<own cgroup>/<name>` in every mounted v1 hierarchy; records what it made in `record`."""

    def __init__(self, path: str, record: Path, fs: Path = _CGROUP_FS) -> None:
        if not path.startswith("/") or ".." in path.split("/"):
            raise CgroupError(f"cgroup path must be absolute without '..': {path!r}")
        self.path = path
        self.record = record
        self.fs = fs

    def hierarchies(self) -> list[Path]:
        """Mounted v1 hierarchies (cpu, memory, pids, ...), not the v2 `unified` one."""
        found = []
        for entry in sorted(self.fs.iterdir()):
            if entry.is_symlink() or not entry.is_dir() or entry.name == "unified":
                continue
            if (entry / "cgroup.procs").exists():
                found.append(entry)
        return found

    def _created(self) -> list[str]:
        try:
            raw = json.loads(self.record.read_text())
            return [str(p) for p in raw]
        except (OSError, ValueError, TypeError):
            return []

    def ensure(self) -> None:
        """Create the path (and missing parents) in every hierarchy, remembering each new dir."""
        created = self._created()
        parts = [p for p in self.path.split("/") if p]
        for hierarchy in self.hierarchies():
            current = hierarchy
            for part in parts:
                parent, current = current, current / part
                if current.is_dir():
                    continue
                current.mkdir()
                created.append(str(current))
                self._save(created)
                if hierarchy.name.startswith("cpuset"):
                    for name in _CPUSET_FILES:
                        (current / name).write_text((parent / name).read_text())

    def _save(self, created: list[str]) -> None:
        self.record.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.record.with_suffix(".tmp")
        tmp.write_text(json.dumps(created) + "\n")
        tmp.replace(self.record)

    def remove(self) -> list[str]:
        """Remove the dirs `ensure` created, deepest first, skipping any still in use."""
        removed = []
        left = []
        for path in sorted(self._created(), key=lambda p: p.count("/"), reverse=True):
            # Children the kubelet made (kubepods/...) go first: they are below our dirs.
            for dirpath, dirnames, _ in os.walk(path, topdown=False):
                for name in dirnames:
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(dirpath, name))
            try:
                os.rmdir(path)
                removed.append(path)
            except FileNotFoundError:
                pass
            except OSError:
                left.append(path)
        if left:
            self._save(left)
        else:
            self.record.unlink(missing_ok=True)
        return removed
