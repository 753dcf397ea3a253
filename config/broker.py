"""The Redis broker transport, made to survive a broker restart with messages held.

A worker holds messages it has not acknowledged: countdown (ETA) tasks wait in it until they are
due, and late-acknowledged tasks run. When the broker goes away, Celery collects the broken
connection, which detaches the transport, then closes it; closing puts the held messages back in
their queue, which cannot work while the broker is down. Two things go wrong there in kombu's
Redis channel, and both are fixed here:

- the second close reaches the detached transport and fails with ``AttributeError: 'NoneType'
  object has no attribute 'hostname'``, not a connection error, so nothing on the teardown path
  ignores it and the worker stops ("Unrecoverable error"). Here it is the connection error it is.
- the held messages stay recorded as unacknowledged in the broker (it keeps them on disk), and
  only come back when the visibility timeout has passed (an hour). Here the worker remembers
  which ones it held, and the first channel it opens once the broker answers again puts exactly
  those back in their queues (kombu's own transactional ``restore_by_tag``, which does nothing
  to a message someone else restored already). Other workers' messages are left alone.

The settings name this transport (``CELERY_BROKER_TRANSPORT``); ``tests/test_broker_restart.py``
restarts a real broker under a real worker holding countdown tasks.
"""

import logging
import threading
from typing import Any

from kombu.transport import redis
from redis.exceptions import ConnectionError as RedisConnectionError

logger = logging.getLogger(__name__)

# Delivery tags of messages this process held when its broker connection broke, not yet put back.
_held: set[str] = set()
_held_lock = threading.Lock()


class QoS(redis.QoS):
    def restore_unacked(self, client: Any = None) -> Any:
        tags: list[str] = list(self._delivered or ())
        try:
            return super().restore_unacked(client)
        except self.channel.connection_errors:
            with _held_lock:
                _held.update(tags)
            raise


class Channel(redis.Channel):
    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # it has pinged the broker: it answers
        if _held:
            self._restore_held()

    def _restore_held(self) -> None:
        with _held_lock:
            tags = list(_held)
        restored = 0
        for tag in tags:
            try:
                self.qos.restore_by_tag(tag, client=self.client)
            except self.connection_errors:
                return  # the broker went away again: the next channel tries the rest
            with _held_lock:
                _held.discard(tag)
            restored += 1
        logger.info("put %d held message(s) back in their queues", restored)

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:  # the transport was detached: the connection is gone
            raise RedisConnectionError("the broker connection is closed")
        return super()._connparams(asynchronous=asynchronous)


class Transport(redis.Transport):
    Channel = Channel
