"""The worker's healthcheck: ``python -m config.worker_health`` (docker-compose.yml).

It asks this container's worker to answer a ping over the broker, three times before it gives
up. A worker that never answers while the broker does is stuck: the check sends it SIGQUIT
(Celery's cold shutdown; the tasks it held are acknowledged late, so they are delivered again),
the container stops, and its restart policy starts a fresh one. Docker marks a container
unhealthy but never restarts it for that alone, hence the signal.

While the broker itself does not answer, the worker is not at fault: the check fails (the
container shows unhealthy) and leaves the worker alone, which reconnects when the broker is back
and then puts back what it held (``config/broker.py``); a restarted worker would have forgotten.
"""

import argparse
import os
import signal
import socket
import sys
import time

ATTEMPTS = 3
PAUSE_SECONDS = 5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", default=f"celery@{socket.gethostname()}")
    parser.add_argument("--pid", type=int, default=1, help="the worker's process (default: 1)")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--pause", type=float, default=PAUSE_SECONDS)
    options = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")
    from config.celery_app import app

    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(options.pause)
        try:
            with app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=1, timeout=options.timeout)
                replies = app.control.ping(
                    destination=[options.node], timeout=options.timeout, connection=connection
                )
        except Exception as exc:  # the broker does not answer: not the worker's fault
            print(f"broker unreachable: {exc}", file=sys.stderr)
            return 1
        if any(options.node in reply for reply in replies):
            return 0
    print(f"{options.node} did not answer {ATTEMPTS} pings: stopping it", file=sys.stderr)
    os.kill(options.pid, signal.SIGQUIT)
    return 1


if __name__ == "__main__":
    sys.exit(main())
