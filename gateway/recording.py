"""Writing calls off their path: a bounded queue, and one thread per gateway process that hands
them to the worker in batches.

A call puts its record and goes on; it never waits for the broker or the database. The thread
takes what is queued every ``MCP_GATEWAY_TRACE_FLUSH_SECONDS`` (or as soon as a batch is full:
``MCP_GATEWAY_TRACE_BATCH`` calls, or ``BATCH_OUTPUT_BYTES`` of their outputs) and queues one
``gateway_calls_record`` task per batch; the worker stores it with ``services.calls_record``
(ingest, with its data flow, is the expensive part of a call: in the gateway's process it would
hold the interpreter's lock the event loop needs for every request). When the queue is full the
record is dropped and counted (``overflow``, shown by the gateway's ``/healthz`` and logged): a
slow broker costs traces, never calls. A batch the broker refuses is logged and counted the same
way (``failed``).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import asdict

from django.db import close_old_connections

from .services import CallRecord
from .tasks import gateway_calls_record

logger = logging.getLogger(__name__)

BATCH_OUTPUT_BYTES = 8 * 1024 * 1024  # outputs per task message, at most (past one call's)


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
        self.sent = 0  # calls handed to the worker
        self.writing = 0  # calls taken from the queue and being handed over now
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
            "sent": self.sent,
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
        self.writing = len(batch)
        close_old_connections()  # an eager task (tests, CELERY_TASK_ALWAYS_EAGER) runs here
        try:
            gateway_calls_record.delay([asdict(record) for record in batch])
        except Exception:  # noqa: BLE001 - the thread outlives a failing broker
            self.failed += len(batch)
            logger.exception("gateway: %s calls not recorded", len(batch))
            return
        finally:
            self.writing = 0
            close_old_connections()
        self.sent += len(batch)
