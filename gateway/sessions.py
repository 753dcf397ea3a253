"""What a gateway session carries from call to call, kept in Redis where every gateway process
reads it.

No Django here. A call reads its step number and its session's state, and counts itself
against its application's calls per minute (``gateway/limits.py``), in one round trip
(``begin``: one Lua script of INCR, EXPIRE, LRANGE, SMEMBERS, then INCR, EXPIRE, GET of the
application's counters) on the event loop, with no thread;
a forwarded call that a later one is judged by appends itself in one more (``add``: RPUSH and
SADD are atomic, so two calls of one session finishing together both stay). Without Redis (the
embedded default), ``services.session_begin`` and ``services.session_call_add`` keep the same
state in the Django cache.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import redis.asyncio

from .limits import WINDOW_SECONDS

logger = logging.getLogger(__name__)

SESSION_SECONDS = 24 * 3600
SESSION_CALLS_KEPT = 200  # earlier calls per session the plan invariants judge a call against
TIMEOUT_SECONDS = 2.0
CANCEL_CHANNEL = "gateway:cancel"
# A call begins: its session's step (counted), earlier calls and produced variables, and, with
# two more keys, its application's counters of this minute (counted) and the previous one.
# KEYS: step, calls, produced[, this minute, previous minute]; ARGV: their lifetimes.
BEGIN = """
local step = redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
local calls = redis.call('LRANGE', KEYS[2], 0, -1)
local produced = redis.call('SMEMBERS', KEYS[3])
local this_minute, last_minute = 0, 0
if #KEYS == 5 then
  this_minute = redis.call('INCR', KEYS[4])
  redis.call('EXPIRE', KEYS[4], ARGV[2])
  last_minute = tonumber(redis.call('GET', KEYS[5]) or '0')
end
return {step, calls, produced, this_minute, last_minute}
"""


@dataclass
class SessionState:
    """What a session's earlier forwarded calls were, and the variables they produced."""

    calls: list[dict[str, Any]] = field(default_factory=list)  # {"tool", "args"}
    produced: list[str] = field(default_factory=list)


@dataclass
class Begun:
    """A call's step number, its session's state, and its application's call counters (this
    minute's, this call included, and the previous minute's; both 0 when not counted)."""

    step: int
    state: SessionState
    calls_this_minute: int = 0
    calls_last_minute: int = 0


def rate_key(counter: str, window: int) -> str:
    return f"gateway:rate:{counter}:{window}"


class SessionStoreDown(Exception):
    """Redis did not answer: the call cannot be judged against its session."""


class RedisSessions:
    def __init__(self, url: str) -> None:
        self.client = redis.asyncio.Redis.from_url(
            url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
        )
        # One script, not a pipeline of seven commands: half the client's work per call.
        self.begun = self.client.register_script(BEGIN)
        # A subscription waits for messages as long as none comes: no read timeout on it.
        self.listener = redis.asyncio.Redis.from_url(
            url, socket_connect_timeout=TIMEOUT_SECONDS, health_check_interval=30
        )

    async def begin(self, session: str, *, counter: str = "", window: int = 0) -> Begun:
        """The call's step number (0, 1, 2... across every process) and the session's state;
        with a ``counter`` (an application), the call is counted in its minute ``window``."""
        keys = [
            f"gateway:session:{session}:step",
            f"gateway:session:{session}:calls",
            f"gateway:session:{session}:produced",
        ]
        if counter:
            keys += [rate_key(counter, window), rate_key(counter, window - 1)]
        try:
            step, calls, produced, this_minute, last_minute = await self.begun(
                keys=keys, args=[SESSION_SECONDS, 2 * WINDOW_SECONDS]
            )
        except redis.RedisError as exc:
            raise SessionStoreDown(str(exc)) from None
        return Begun(
            step=int(step) - 1,
            state=SessionState(
                calls=[json.loads(call) for call in calls],
                produced=sorted(name.decode() for name in produced),
            ),
            calls_this_minute=int(this_minute),
            calls_last_minute=int(last_minute),
        )

    async def add(
        self, session: str, *, tool: str, args: dict[str, Any], produces: Sequence[str]
    ) -> None:
        """Remember a forwarded, successful call and what it produced."""
        calls_key = f"gateway:session:{session}:calls"
        produced_key = f"gateway:session:{session}:produced"
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.rpush(calls_key, json.dumps({"tool": tool, "args": args}))
                pipe.ltrim(calls_key, -SESSION_CALLS_KEPT, -1)
                pipe.expire(calls_key, SESSION_SECONDS)
                if produces:
                    pipe.sadd(produced_key, *produces)
                    pipe.expire(produced_key, SESSION_SECONDS)
                await pipe.execute()
        except redis.RedisError as exc:
            raise SessionStoreDown(str(exc)) from None

    async def cancel_publish(self, call: str) -> None:
        """Tell every gateway process that the client cancelled ``call`` (``running_key``):
        the one forwarding it cancels it."""
        try:
            await self.client.publish(CANCEL_CHANNEL, call)
        except redis.RedisError as exc:
            raise SessionStoreDown(str(exc)) from None

    async def cancel_listen(self, on_cancel: Callable[[str], object]) -> None:
        """Hand each call a process published as cancelled to ``on_cancel``, until cancelled;
        a lost connection is made again (what was published meanwhile is lost: those calls run
        to their end)."""
        while True:
            try:
                async with self.listener.pubsub(ignore_subscribe_messages=True) as pubsub:
                    await pubsub.subscribe(CANCEL_CHANNEL)
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            on_cancel(message["data"].decode(errors="replace"))
            except (redis.RedisError, OSError) as exc:
                logger.warning("gateway: cancellations not heard (Redis: %s); retrying", exc)
                await anyio.sleep(1.0)

    async def close(self) -> None:
        await self.client.aclose()
        await self.listener.aclose()
