"""Writing calls off their path: a bounded queue and one writer thread per gateway process.

A call puts its record and goes on; it never waits for the database. The writer takes what is
queued every ``MCP_GATEWAY_TRACE_FLUSH_SECONDS`` (or as soon as a batch is full) and stores it
with ``services.calls_record``. When the queue is full the record is dropped and counted
(``overflow``, shown by the gateway's ``/healthz`` and logged): a slow database costs traces,
never calls. A batch the database refuses is logged and counted the same way.
"""

from __future__ import annotations

import logging
import queue
import threading

from django.db import close_old_connections

from .services import CallRecord, calls_record

logger = logging.getLogger(__name__)


class Recorder:
    def __init__(self, *, capacity: int, batch: int, flush_seconds: float) -> None:
        self.queue: queue.Queue[CallRecord] = queue.Queue(maxsize=capacity)
        self.batch = batch
        self.flush_seconds = flush_seconds
        self.overflow = 0
        self.failed = 0
        self.traces = 0
        self.writing = 0  # calls taken from the queue and being stored now
        self.refusals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gateway-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def record(self, record: CallRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.overflow += 1
            if self.overflow in (1, 10, 100) or self.overflow % 1000 == 0:
                logger.warning("gateway trace queue full: %s calls not recorded", self.overflow)

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop."""
        self._stop.set()
        self._thread.join(timeout)

    def stats(self) -> dict[str, int]:
        return {
            "queued": self.queue.qsize(),
            "writing": self.writing,
            "overflow": self.overflow,
            "failed": self.failed,
            "traces": self.traces,
            "refusals": self.refusals,
        }

    def _run(self) -> None:
        while True:
            stopping = self._stop.is_set()
            batch = self._take()
            if batch:
                self._write(batch)
            elif stopping:
                return

    def _take(self) -> list[CallRecord]:
        batch: list[CallRecord] = []
        try:
            batch.append(self.queue.get(timeout=self.flush_seconds))
        except queue.Empty:
            return batch
        self.writing = 1  # from here on, what was taken is not lost from the figures
        while len(batch) < self.batch:
            try:
                batch.append(self.queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _write(self, batch: list[CallRecord]) -> None:
        close_old_connections()
        self.writing = len(batch)
        try:
            traces, refusals = calls_record(batch)
        except Exception:  # noqa: BLE001 - the writer outlives a failing database
            self.failed += len(batch)
            logger.exception("gateway: %s calls not recorded", len(batch))
            return
        finally:
            self.writing = 0
            close_old_connections()
        self.traces += traces
        self.refusals += refusals
