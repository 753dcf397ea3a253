"""What an outbound URL must be, wherever the registry sends a request: pure (no Django).

Webhooks (``api/outbound.py``) and the MCP registries ``mcp_servers add --from-registry`` reads
(``sources/mcp_registry.py``) both start here.
"""

from urllib.parse import urlsplit


def url_problem(url: str) -> str:
    """Why ``url`` cannot be a receiver's, or "": http(s), a host, no user name or password
    (they would be sent to the host, and ``user@host`` hides the real host from a reader)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port out of range raises here)
    except ValueError as exc:
        return f"Not a valid URL: {exc}."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Only http and https URLs with a host are allowed."
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "A URL may not carry a user name or password."
    return ""
