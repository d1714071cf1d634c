"""Finding what to kill on the host: QEMUs by cgroup, a container's task by containerd,
the program under a shell wrapper."""

from __future__ import annotations

from pathlib import Path

from kv_soak.local import main_process, parse_ctr_tasks, qemu_view, scan_qemus

UID = "0b5f3a52-8c1e-4d1e-9f6a-0123456789ab"
CGROUP = (
    "12:pids:/kubevirt-py-26400/kv-node-0/kubepods/burstable/pod" + UID + "/c0ffee\n"
    "4:memory:/kubevirt-py-26400/kv-node-0/kubepods/burstable/pod" + UID + "/c0ffee\n"
)
QEMU_ARGV = ["/usr/bin/qemu-system-x86_64", "-name", "guest=ns_vm,debug-threads=on", "-S"]


def test_a_qemu_is_attributed_to_its_pod_and_guest() -> None:
    view = qemu_view(42, QEMU_ARGV, CGROUP)
    assert view is not None
    assert (view.pid, view.pod_uid, view.guest) == (42, UID, "ns_vm")
    systemd = CGROUP.replace(UID, UID.replace("-", "_"))
    assert qemu_view(42, QEMU_ARGV, systemd).pod_uid == UID  # type: ignore[union-attr]
    assert qemu_view(43, ["/usr/sbin/libvirtd"], CGROUP) is None
    probe = [
        "/usr/bin/qemu-system-x86_64",
        "-S",
        "-no-user-config",
        "-machine",
        "none,accel=kvm:tcg",
    ]
    assert qemu_view(45, probe, CGROUP) is None  # libvirtd's capability probe, no guest
    assert qemu_view(44, QEMU_ARGV, "0::/\n").pod_uid is None  # type: ignore[union-attr]


def _proc(root: Path, pid: int, comm: str, argv: list[str], children: list[int] = []) -> None:  # noqa: B006
    d = root / str(pid)
    (d / "task" / str(pid)).mkdir(parents=True)
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(("\0".join(argv) + "\0").encode())
    (d / "cgroup").write_text(CGROUP)
    (d / "task" / str(pid) / "children").write_text(" ".join(map(str, children)))


def test_scan_finds_only_qemus(tmp_path: Path) -> None:
    _proc(tmp_path, 10, "qemu-system-x86", QEMU_ARGV)
    _proc(tmp_path, 11, "libvirtd", ["/usr/sbin/libvirtd"])
    (tmp_path / "self").mkdir()
    assert [q.pid for q in scan_qemus(tmp_path)] == [10]


def test_the_main_process_is_the_python_under_a_shell_wrapper(tmp_path: Path) -> None:
    _proc(tmp_path, 1, "sh", ["/bin/sh", "-c", "python3 -m virt_handler | tee"], [2, 3])
    _proc(tmp_path, 2, "tee", ["tee"])
    _proc(tmp_path, 3, "python3", ["python3", "-m", "virt_handler"])
    _proc(tmp_path, 7, "python3", ["python3", "-m", "virt_api"])
    assert main_process(1, tmp_path) == 3
    assert main_process(7, tmp_path) == 7
    assert main_process(99, tmp_path) == 99  # gone: itself


def test_ctr_task_listing_is_parsed() -> None:
    text = "TASK      PID      STATUS\nabc123    4242     RUNNING\ndef456    0        STOPPED\n"
    assert parse_ctr_tasks(text) == {"abc123": 4242, "def456": 0}
