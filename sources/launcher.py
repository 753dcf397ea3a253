"""Starts one stdio MCP server and makes sure nothing it starts outlives it.

Run by ``sources.client`` as ``python -I launcher.py COMMAND [ARGS...]`` with the small, secret-
free environment a stdio server gets: so the server's parent process (this one) holds nothing a
server could read from ``/proc/<parent>/environ``. Standard library only, no Django, and
nothing imported from the project: it runs in a fresh interpreter.

The launcher is a child subreaper (``PR_SET_CHILD_SUBREAPER``): whatever the server starts and
abandons, even a daemon that left the process group with ``setsid``, becomes this process's
child instead of init's. When the server exits, or the launcher is asked to stop (SIGTERM,
SIGINT, SIGHUP, or its parent dying), it kills every descendant it has, round after round
until none is left, and exits with the server's status.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children() -> list[int]:
    """This process's children, as the kernel lists them, or by reading every process's
    parent where the kernel keeps no such list."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as listing:
            return [int(pid) for pid in listing.read().split()]
    except OSError:
        pass
    pids = []
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc: nothing to find, the process group is stopped by the caller
        return []
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    if int(stat.read().rsplit(")", 1)[1].split()[1]) == me:
                        pids.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return pids


def _kill_descendants() -> None:
    """Kill the children and reap them, round after round: the orphans of each round come to
    this process (the subreaper) and are killed in the next."""
    for _ in range(10_000):  # bounded even against a server forking as fast as it can
        children = _children()
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: launcher.py COMMAND [ARGS...]\n")
        return 2
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the worker gone: stop everything here too

    def stop(signum: int, frame: object) -> None:
        _kill_descendants()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, stop)
    try:
        server = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]}: {exc}\n")
        return 127
    status = 0
    while True:
        try:
            pid, wait_status = os.waitpid(-1, 0)  # reap adopted orphans along the way
        except ChildProcessError:
            break
        if pid == server:
            status = os.waitstatus_to_exitcode(wait_status)
            break
    _kill_descendants()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
