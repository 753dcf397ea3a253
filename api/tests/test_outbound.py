"""The bounded POST of webhooks (api/outbound.py) against real local receivers: the deadline
holds through a TLS handshake, and the address rules read IPv4 inside IPv6."""

import ipaddress
import socket
import threading
import time

import pytest

from api import outbound

LOOPBACK = [ipaddress.ip_network("127.0.0.0/8")]


def test_a_tls_handshake_dribbled_a_byte_a_second_ends_at_the_deadline():
    sent = []
    listener = socket.create_server(("127.0.0.1", 0))

    def tarpit():
        conn, _ = listener.accept()
        with conn:
            # A handshake record announcing 16 KiB, then its bytes one a second.
            for byte in b"\x16\x03\x03\x40\x00" + b"\x02" * 60:
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
                sent.append(byte)
                time.sleep(1)

    threading.Thread(target=tarpit, daemon=True).start()
    limits = outbound.Limits(deadline_seconds=2, max_answer_bytes=1024)

    with pytest.raises(outbound.Unreachable, match="deadline"):
        outbound.post(
            f"https://localhost:{listener.getsockname()[1]}/x", b"{}", {},
            limits=limits, allowed_networks=LOOPBACK,
        )  # fmt: skip
    listener.close()
    assert 1 <= len(sent) <= 3  # of 65: a per-read timeout would have waited for them all


@pytest.mark.parametrize(
    "address, allowed",
    [
        ("::ffff:10.0.0.1", False),
        ("::ffff:8.8.8.8", True),
        ("224.0.0.1", False),  # multicast
        ("255.255.255.255", False),
        ("fc00::1", False),
        ("2606:4700::1111", True),
        ("93.184.215.14", True),
    ],
)
def test_it_judges_addresses_by_what_they_reach(address, allowed):
    problem = outbound.address_problem(ipaddress.ip_address(address), [])
    assert (problem == "") is allowed, problem


def test_an_allowed_network_lets_its_addresses_through_and_no_others():
    allowed = [ipaddress.ip_network("10.0.0.0/8")]
    assert outbound.address_problem(ipaddress.ip_address("::ffff:10.1.1.1"), allowed) == ""
    assert outbound.address_problem(ipaddress.ip_address("192.168.1.1"), allowed) != ""


def test_a_header_with_a_line_break_is_refused_before_any_connection():
    with pytest.raises(outbound.Refused, match="line break"):
        outbound.post(
            "http://93.184.215.14/x", b"{}", {"X-Event": "a\r\nInjected: yes"},
            limits=outbound.Limits(deadline_seconds=1, max_answer_bytes=1024),
        )  # fmt: skip
