"""One bounded HTTP POST to a receiver the registry does not control (webhooks).

Three bounds, each of which a hostile receiver defeated in a client with per-read timeouts:

- a deadline over the whole exchange, wall clock: name lookup, connect, TLS handshake, sending
  and every read. The socket is non-blocking and each wait is for what is left of the deadline,
  so a receiver sending one byte a second cannot stretch it (a per-read timeout restarts at
  every byte);
- a cap on the bytes read from the answer. Only the status line decides, so nothing past it is
  read, and a status line longer than the cap is no answer;
- the addresses: the host is resolved once, every address it resolves to is judged (by the
  caller's ``address_problem``) and the connection goes to an address so judged, so a name that
  resolves elsewhere the second time (DNS rebinding) cannot lead it inside.

Pure: no Django. Failures raise ``Refused`` (the target is not allowed: its reason is safe to
show) or ``Unreachable`` (no valid answer in time: its detail is for the operator's log only, as
it tells a closed port from an open one).
"""

from __future__ import annotations

import errno
import ipaddress
import os
import select
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as LookupTimeout
from dataclasses import dataclass
from urllib.parse import urlsplit

from registry.web import url_problem

__all__ = ["Limits", "Refused", "Unreachable", "address_problem", "post", "url_problem"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
READ_CHUNK = 4096


class Refused(Exception):
    """The URL or one of its addresses is not allowed; nothing was sent."""


class Unreachable(Exception):
    """No valid answer within the deadline and the cap (refused, reset, silent, too long)."""


@dataclass(frozen=True)
class Limits:
    deadline_seconds: float
    max_answer_bytes: int


def address_problem(address: IPAddress, allowed: Iterable[IPNetwork]) -> str:
    """Why the registry may not connect to ``address``, or "": only global unicast addresses,
    except in the networks an operator allowed. An IPv4 address written as IPv6 is judged as
    the IPv4 address it is."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address.version == network.version and address in network for network in allowed):
        return ""
    if address.is_global and not address.is_multicast:
        return ""
    return (
        f"{address} is a private, loopback, link-local or reserved address "
        "(WEBHOOK_ALLOWED_NETWORKS allows such networks)."
    )


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    limits: Limits,
    allowed_networks: Iterable[IPNetwork] = (),
    resolve: Callable[[str, int], list[IPAddress]] | None = None,
) -> int:
    """POST ``body`` to ``url`` and return the answer's status code."""
    problem = url_problem(url)
    if problem:
        raise Refused(problem)
    parts = urlsplit(url)
    host = parts.hostname or ""
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    ends = time.monotonic() + limits.deadline_seconds
    networks = list(allowed_networks)
    addresses = _addresses(host, port, ends, resolve or _resolve)
    literal = _literal(host)
    for address in addresses:
        problem = address_problem(address, networks)
        if problem and literal is None:
            # Not the address itself: what an inside name resolves to is not the caller's to see.
            raise Refused(
                f"{host} resolves to a private, loopback, link-local or reserved address "
                "(WEBHOOK_ALLOWED_NETWORKS allows such networks)."
            )
        if problem:
            raise Refused(problem)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    authority = host if ":" not in host else f"[{host}]"
    if parts.port:
        authority += f":{parts.port}"
    request = _request(path, authority, body, headers)
    failures = []
    for address in addresses:
        try:
            return _exchange(address, port, host if https else None, request, ends, limits)
        except (OSError, ValueError, Unreachable) as exc:
            failures.append(f"{address}: {type(exc).__name__}: {exc}")
            if time.monotonic() >= ends:
                break
    raise Unreachable("; ".join(failures) or "no address")


def _request(path: str, authority: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {authority}", f"Content-Length: {len(body)}"]
    lines += ["Connection: close", "User-Agent: tool-contract-registry"]
    for name, value in headers.items():
        if "\r" in name + value or "\n" in name + value:
            raise Refused(f"The header {name!r} holds a line break.")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _resolve(host: str, port: int) -> list[IPAddress]:
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _addresses(
    host: str, port: int, ends: float, resolve: Callable[[str, int], list[IPAddress]]
) -> list[IPAddress]:
    literal = _literal(host)
    if literal is not None:
        return [literal]
    # The resolver has timeouts of its own, not ours: it waits in a thread the deadline bounds.
    executor = ThreadPoolExecutor(max_workers=1)
    try:
        addresses = executor.submit(resolve, host, port).result(_left(ends))
    except LookupTimeout:
        raise Unreachable(f"the name {host} was not resolved within the deadline") from None
    except OSError as exc:
        raise Unreachable(f"the name {host} was not resolved: {exc}") from None
    finally:
        executor.shutdown(wait=False)
    if not addresses:
        raise Unreachable(f"the name {host} has no address")
    return addresses


def _left(ends: float) -> float:
    left = ends - time.monotonic()
    if left <= 0:
        raise Unreachable("no answer within the deadline")
    return left


def _wait(sock: socket.socket, ends: float, *, write: bool) -> None:
    # poll, not select: a worker may hold descriptors numbered past select's 1024.
    poller = select.poll()
    poller.register(sock, select.POLLOUT if write else select.POLLIN)
    if not poller.poll(max(1, int(_left(ends) * 1000))):
        raise Unreachable("no answer within the deadline")


def _exchange(
    address: IPAddress,
    port: int,
    tls_name: str | None,
    request: bytes,
    ends: float,
    limits: Limits,
) -> int:
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    raw = socket.socket(family, socket.SOCK_STREAM)
    sock: socket.socket = raw
    try:
        raw.setblocking(False)
        started = raw.connect_ex((str(address), port))
        if started not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            raise OSError(started, os.strerror(started))
        _wait(raw, ends, write=True)
        error = raw.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise OSError(error, "connect failed")
        if tls_name is not None:
            sock = ssl.create_default_context().wrap_socket(
                raw, server_hostname=tls_name, do_handshake_on_connect=False
            )
            _handshake(sock, ends)
        _send(sock, request, ends)
        return _status(sock, ends, limits.max_answer_bytes)
    finally:
        sock.close()
        raw.close()


def _handshake(sock: socket.socket, ends: float) -> None:
    assert isinstance(sock, ssl.SSLSocket)
    while True:
        try:
            sock.do_handshake()
            return
        except ssl.SSLWantReadError:
            _wait(sock, ends, write=False)
        except ssl.SSLWantWriteError:
            _wait(sock, ends, write=True)


def _send(sock: socket.socket, data: bytes, ends: float) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[sock.send(view) :]
        except (BlockingIOError, ssl.SSLWantWriteError):
            _wait(sock, ends, write=True)
        except ssl.SSLWantReadError:
            _wait(sock, ends, write=False)


def _status(sock: socket.socket, ends: float, cap: int) -> int:
    """The final status code (informational 1xx answers skipped), reading at most ``cap``
    bytes in all."""
    received = bytearray()
    total = 0
    while True:
        head_end = received.find(b"\r\n")
        if head_end >= 0:
            code = _status_code(bytes(received[:head_end]))
            if code >= 200:
                return code
            # A 1xx answer: its header block ends with an empty line; the real one follows.
            block_end = received.find(b"\r\n\r\n")
            if block_end >= 0:
                del received[: block_end + 4]
                continue
        if total >= cap:
            raise Unreachable(f"no status line within {cap} bytes")
        try:
            chunk = sock.recv(min(READ_CHUNK, cap - total))
        except (BlockingIOError, ssl.SSLWantReadError):
            _wait(sock, ends, write=False)
            continue
        except ssl.SSLWantWriteError:
            _wait(sock, ends, write=True)
            continue
        if not chunk:
            raise Unreachable("the connection closed before a status line")
        total += len(chunk)
        received += chunk


def _status_code(line: bytes) -> int:
    version, _, rest = line.partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise Unreachable("the answer is not HTTP")
    return int(code)
