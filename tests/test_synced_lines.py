"""Recording files written while recorded: the disk work is off the recording thread, nothing handed over is lost
or reordered, and a failed write reaches the recording thread as an error."""

from __future__ import annotations

import errno
import threading
import time

import pytest

import formats.synced_lines as synced
from formats.synced_lines import SyncedLines


def test_the_recording_thread_never_fsyncs_and_lines_reach_the_disk_without_more_adds(tmp_path, monkeypatch):
    threads = []
    real = synced.os.fsync
    monkeypatch.setattr(synced.os, "fsync", lambda fd: (threads.append(threading.current_thread()), real(fd)))
    f = SyncedLines(tmp_path / "a.csv", "t,x", sync_s=0.01)
    try:
        f.add("0,1")
        deadline = time.monotonic() + 5.0
        while (tmp_path / "a.csv").read_text() != "t,x\n0,1\n" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert (tmp_path / "a.csv").read_text() == "t,x\n0,1\n"  # synced by its own thread: no add since
    finally:
        f.close()
    assert threads and threading.current_thread() not in threads[:-1]  # only close syncs in the caller


def test_lines_added_while_syncing_are_all_kept_in_order(tmp_path):
    f = SyncedLines(tmp_path / "a.csv", sync_s=0.0005)
    n = 50_000
    for i in range(n):
        f.add(str(i))
    f.close()
    assert (tmp_path / "a.csv").read_text().split() == [str(i) for i in range(n)]
    f.close()  # closing twice is harmless


def test_a_failed_write_is_raised_in_the_recording_thread(tmp_path, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    f = SyncedLines(tmp_path / "a.csv", "h", sync_s=0.005)
    monkeypatch.setattr(synced.os, "fsync", full)
    deadline = time.monotonic() + 5.0
    with pytest.raises(OSError, match=r"a\.csv: writing failed .*No space left"):  # noqa: PT012
        while time.monotonic() < deadline:
            f.add("1")
            time.sleep(0.005)
    with pytest.raises(OSError, match="No space left"):
        f.close()
    assert f.closed
