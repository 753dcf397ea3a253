"""Writing calls off their path: a bounded queue and one writer thread per gateway process.

A call appends its record and goes on; it never waits for the database, and wakes no thread
(the writer looks every ``MCP_GATEWAY_TRACE_FLUSH_SECONDS``, so a call costs the event loop no
hand-over of the interpreter lock). The writer stores what is queued in batches
(``MCP_GATEWAY_TRACE_BATCH`` calls, or ``BATCH_OUTPUT_BYTES`` of their outputs) with
``services.calls_record``. When the queue is full the record is dropped and counted
(``overflow``, shown by the gateway's ``/healthz`` and logged): a slow database costs traces,
never calls. A batch the database refuses is logged and counted the same way.
"""

from __future__ import annotations

import logging
import threading
from collections import deque

from django.db import close_old_connections

from .services import CallRecord, calls_record

logger = logging.getLogger(__name__)

BATCH_OUTPUT_BYTES = 8 * 1024 * 1024  # outputs per batch, at most (past one call's)


class Recorder:
    def __init__(self, *, capacity: int, batch: int, flush_seconds: float) -> None:
        # Appended by the event loop, taken by the thread: a deque's append and popleft are
        # atomic, and a call wakes no thread (the thread looks every flush period), so putting
        # a record costs the loop no hand-over of the interpreter's lock.
        self.queue: deque[CallRecord] = deque()
        self.capacity = capacity
        self.batch = batch
        self.flush_seconds = flush_seconds
        self.overflow = 0
        self.failed = 0
        self.traces = 0
        self.refusals = 0
        self.writing = 0  # calls taken from the queue and being stored now
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gateway-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def record(self, record: CallRecord) -> None:
        if len(self.queue) < self.capacity:
            self.queue.append(record)
        else:
            self.overflow += 1
            if self.overflow in (1, 10, 100) or self.overflow % 1000 == 0:
                logger.warning("gateway trace queue full: %s calls not recorded", self.overflow)

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued, then stop."""
        self._stop.set()
        self._thread.join(timeout)

    def stats(self) -> dict[str, int]:
        return {
            "queued": len(self.queue),
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
            else:
                self._stop.wait(self.flush_seconds)

    def _take(self) -> list[CallRecord]:
        batch: list[CallRecord] = []
        size = 0
        while len(batch) < self.batch and size < BATCH_OUTPUT_BYTES:
            try:
                record = self.queue.popleft()
            except IndexError:
                break
            if not batch:
                self.writing = 1  # from here on, what was taken is not lost from the figures
            batch.append(record)
            size += record.output_bytes
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
