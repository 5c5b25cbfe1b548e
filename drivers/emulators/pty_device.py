"""Base of the emulated serial devices: a pty whose master side a background thread serves."""

from __future__ import annotations

import os
import select
import threading
import time

from drivers.transports import Pty


class PtyDevice:
    """Owns the pty and the serving thread; subclasses implement `_loop` with `_recv`/`_send`."""

    def _start(self, name: str) -> None:
        self.pty = Pty()
        self.path = self.pty.path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        raise TypeError(f"{type(self).__name__} must define _loop")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self.pty.close()

    def _recv(self, timeout: float) -> bytes:
        """Bytes the host wrote within `timeout` s (empty when none, or while no client has the slave open)."""
        fd = self.pty.master
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            return b""
        try:
            return os.read(fd, 4096)
        except BlockingIOError:
            return b""
        except OSError:
            time.sleep(0.01)  # no client on the slave yet
            return b""

    def _send(self, data: bytes) -> None:
        try:
            os.write(self.pty.master, data)
        except OSError:
            pass
