"""A process of a pod (or of one of its containers) on this node, found through /proc.

The handler runs with the host's pid namespace: a process's `/proc/<pid>/cgroup` names its
pod (`pod<uid>`, with `-` or `_`, by cgroup driver) and its container's id.
"""

from __future__ import annotations

import os

__all__ = ["find_pod_process"]


def find_pod_process(pod_uid: str, container_id: str = "", proc: str = "/proc") -> int | None:
    """The pid of a process of the pod (in `container_id`'s container, if given), or None."""
    marks = (f"pod{pod_uid}", f"pod{pod_uid.replace('-', '_')}")
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/cgroup") as f:
                cgroups = f.read()
        except OSError:
            continue
        if container_id in cgroups and any(m in cgroups for m in marks):
            return int(entry)
    return None
