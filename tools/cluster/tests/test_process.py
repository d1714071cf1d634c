"""Daemons outlive their launcher, and stop() only signals the very process it started."""

import os
import signal
import sys
import time
from pathlib import Path

from kv_cluster.process import ProcessRecord, spawn_daemon, stop_process

_SLEEPER = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"]


def _wait_for(condition: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_a_daemon_runs_detached_logs_and_stops(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "sleeper.log"
    record = spawn_daemon("sleeper", _SLEEPER, log=log, cwd=tmp_path)
    try:
        assert record.alive()
        # Not our child: its parent is not this test process, and it leads its own session.
        assert os.getsid(record.pid) == record.pid
        assert _wait_for(lambda: "up" in log.read_text())
        record.save(tmp_path / "sleeper.json")
        assert ProcessRecord.load(tmp_path / "sleeper.json") == record
    finally:
        assert stop_process(record, timeout=5.0)
    assert not record.alive()
    assert not stop_process(record)


def test_a_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    record = spawn_daemon("sleeper", _SLEEPER, log=tmp_path / "s.log", cwd=tmp_path)
    try:
        impostor = ProcessRecord("sleeper", record.pid, record.start_time + 1, record.argv)
        assert not impostor.alive()
        assert not stop_process(impostor)
        assert record.alive()
    finally:
        os.kill(record.pid, signal.SIGKILL)
    assert _wait_for(lambda: not record.alive())


def test_a_missing_or_garbled_record_reads_as_none(tmp_path: Path) -> None:
    assert ProcessRecord.load(tmp_path / "absent.json") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert ProcessRecord.load(tmp_path / "bad.json") is None
