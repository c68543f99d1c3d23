"""A daemon thread that writes one of the broker's config files off the event loop: when asked
(:meth:`ConfigPersister.request`), every ``interval_s`` if one is given, and once more at stop."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class ConfigPersister:
    """Runs ``persist`` in its own thread; requests made while it writes cause one more write."""

    def __init__(self, name: str, persist: Callable[[], None], interval_s: float | None = None) -> None:
        self._persist = persist
        self._interval_s = interval_s
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request(self) -> None:
        """Write the file soon (returns at once)."""
        self._wake.set()

    def stop(self) -> None:
        """Write the file a last time and end the thread (blocks until both are done)."""
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval_s)
            self._wake.clear()
            stopping = self._stopping
            try:
                self._persist()
            except Exception:
                log.exception("%s failed to write its file", self._thread.name)
            if stopping:
                return
