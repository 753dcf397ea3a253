"""Which requests the gateway answers itself (its plain path) and which go to the SDK's."""

import json

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolRequestParams
from starlette.requests import Request

from gateway import server
from gateway.server import _plain_call

CALL = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "acme.greet", "arguments": {"who": "Ada"}},
}
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
}


def plain(body: object = CALL, method: str = "POST", **headers: str | None):
    merged = {**HEADERS, **headers}
    scope = {
        "type": "http",
        "method": method,
        "path": "/mcp/",
        "headers": [
            (key.encode(), value.encode()) for key, value in merged.items() if value is not None
        ],
    }
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return _plain_call(Request(scope), raw)


def test_a_plain_call_of_a_2025_client_is_answered_by_the_gateway():
    taken = plain()
    assert taken is not None
    request_id, version, params = taken
    assert (request_id, version) == (7, "2025-11-25")
    assert params.name == "acme.greet" and params.arguments == {"who": "Ada"}
    assert plain({**CALL, "id": "a"}, **{"mcp-protocol-version": "2025-06-18"}) is not None
    assert plain({**CALL, "params": {"name": "acme.greet"}}) is not None
    assert plain(accept="*/*") is not None
    assert plain(**{"content-type": "application/json; charset=utf-8"}) is not None


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        json.dumps([CALL]).encode(),
        {**CALL, "jsonrpc": "1.0"},
        {**CALL, "method": "tools/list"},
        {**CALL, "id": True},
        {**CALL, "id": None},
        {**CALL, "id": 1.5},
        {**CALL, "extra": 1},
        {key: value for key, value in CALL.items() if key != "id"},
        {key: value for key, value in CALL.items() if key != "params"},
        {**CALL, "params": []},
        {**CALL, "params": {"arguments": {}}},
        {**CALL, "params": {"name": 3, "arguments": {}}},
        {**CALL, "params": {"name": "acme.greet", "arguments": []}},
        {**CALL, "params": {"name": "acme.greet", "arguments": None}},
        # What only the SDK's path handles: progress, confirmations' state and answers.
        {**CALL, "params": {**CALL["params"], "_meta": {"progressToken": 1}}},
        {**CALL, "params": {**CALL["params"], "_meta": {}}},
        {**CALL, "params": {**CALL["params"], "requestState": "confirm"}},
        {**CALL, "params": {**CALL["params"], "inputResponses": {}}},
        {**CALL, "params": {**CALL["params"], "task": {}}},
    ],
)
def test_any_other_body_goes_to_the_sdk(body):
    assert plain(body) is None


@pytest.mark.parametrize(
    "headers",
    [
        {"mcp-protocol-version": None},
        {"mcp-protocol-version": "2025-03-26"},
        {"mcp-protocol-version": "2024-11-05"},
        # A 2026-07-28 request without that version's ``_meta``.
        {"mcp-protocol-version": "2026-07-28"},
        {"mcp-protocol-version": "bogus"},
        {"content-type": None},
        {"content-type": "text/plain"},
        {"content-type": "application/jsonx"},
        {"accept": None},
        {"accept": "text/event-stream"},
    ],
)
def test_a_request_whose_headers_are_not_a_plain_call_goes_to_the_sdk(headers):
    assert plain(**headers) is None


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
# A call of the SDK's ``Client`` (MCP 2026-07-28) as it sends one (test_gateway.py captures it).
MODERN = {**CALL, "params": {**CALL["params"], "_meta": MODERN_META}}
MODERN_HEADERS = {
    "mcp-protocol-version": "2026-07-28",
    "mcp-method": "tools/call",
    "mcp-name": "acme.greet",
}


def modern(body: object = MODERN, **headers: str | None):
    return plain(body, **{**MODERN_HEADERS, **headers})


def test_a_plain_call_of_a_2026_client_is_answered_by_the_gateway():
    taken = modern()
    assert taken is not None
    request_id, version, params = taken
    assert (request_id, version) == (7, "2026-07-28")
    assert params.name == "acme.greet" and params.arguments == {"who": "Ada"}
    assert params.meta == MODERN_META
    without_info = {
        key: value for key, value in MODERN_META.items() if not key.endswith("clientInfo")
    }
    assert modern({**MODERN, "params": {**MODERN["params"], "_meta": without_info}}) is not None
    roots = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"roots": {}}}
    assert modern({**MODERN, "params": {**MODERN["params"], "_meta": roots}}) is not None
    assert modern(**{"mcp-param-who": "Ada"}) is not None  # the gateway routes by none


def modern_meta(**changes: object) -> dict:
    meta = {**MODERN_META, **changes}
    return {**MODERN, "params": {**MODERN["params"], "_meta": meta}}


@pytest.mark.parametrize(
    "body",
    [
        # A client that declared elicitation may be asked to confirm: the SDK seals the state.
        modern_meta(
            **{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}
        ),
        modern_meta(**{"io.modelcontextprotocol/clientCapabilities": None}),
        modern_meta(progressToken=1),
        modern_meta(**{"example.com/trace": "x"}),
        # What the SDK's ladder refuses: the envelope missing, wrong or unsupported.
        {**MODERN, "params": CALL["params"]},
        {**MODERN, "params": {**MODERN["params"], "_meta": []}},
        modern_meta(**{"io.modelcontextprotocol/protocolVersion": "2025-11-25"}),
        {
            **MODERN,
            "params": {
                **MODERN["params"],
                "_meta": {
                    key: value
                    for key, value in MODERN_META.items()
                    if not key.endswith("protocolVersion")
                },
            },
        },
        # Confirmations' state and answers.
        {**MODERN, "params": {**MODERN["params"], "requestState": "confirm"}},
        {**MODERN, "params": {**MODERN["params"], "inputResponses": {}}},
        {**MODERN, "params": {**MODERN["params"], "task": {}}},
    ],
)
def test_any_other_2026_body_goes_to_the_sdk(body):
    assert modern(body) is None


@pytest.mark.parametrize(
    "headers",
    [
        {"mcp-method": None},
        {"mcp-method": "tools/list"},
        {"mcp-name": None},
        {"mcp-name": "acme.shout"},
        {"accept": "text/event-stream"},
    ],
)
def test_a_2026_request_whose_headers_disagree_with_its_body_goes_to_the_sdk(headers):
    assert modern(**headers) is None


def test_a_2026_request_with_a_routing_header_twice_goes_to_the_sdk():
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp/",
        "headers": [
            *(
                (key.encode(), value.encode())
                for key, value in {**HEADERS, **MODERN_HEADERS}.items()
            ),
            (b"mcp-name", b"acme.greet"),
        ],
    }
    assert _plain_call(Request(scope), json.dumps(MODERN).encode()) is None


def test_a_request_other_than_a_post_goes_to_the_sdk():
    assert plain(method="GET") is None


@pytest.mark.parametrize(
    ("raised", "error"),
    [
        (MCPError(code=INVALID_PARAMS, message="no such thing"), (INVALID_PARAMS, "no such thing")),
        (RuntimeError("boom"), (0, "boom")),
    ],
)
def test_a_plain_call_that_raises_is_answered_as_the_sdks_dispatcher_answers_it(
    monkeypatch, raised, error
):
    """A failure no phase of the call answers becomes the JSON-RPC error the SDK's dispatcher
    would send (its code, or 0 and the message for any other exception), never a 500."""

    sent = _answered_plain(monkeypatch, raised, "2025-11-25")
    assert sent[0]["status"] == 200
    message = json.loads(sent[1]["body"])
    assert message == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": error[0], "message": error[1]},
    }


@pytest.mark.parametrize(
    ("raised", "status", "error"),
    [
        (
            MCPError(code=INVALID_PARAMS, message="no such thing"),
            ERROR_CODE_HTTP_STATUS.get(INVALID_PARAMS, 200),
            (INVALID_PARAMS, "no such thing"),
        ),
        (
            RuntimeError("boom"),
            ERROR_CODE_HTTP_STATUS.get(INTERNAL_ERROR, 200),
            (INTERNAL_ERROR, "Internal server error"),
        ),
    ],
)
def test_a_2026_plain_call_that_raises_is_answered_as_the_sdks_modern_entry_answers_it(
    monkeypatch, raised, status, error
):
    """For a 2026-07-28 client the SDK's entry maps the error as ``modern_error_data`` does
    (any other exception a generic internal error) with its HTTP status."""

    sent = _answered_plain(monkeypatch, raised, "2026-07-28")
    assert sent[0]["status"] == status
    assert (b"content-type", b"application/json") in sent[0]["headers"]
    message = json.loads(sent[1]["body"])
    assert message == {"jsonrpc": "2.0", "id": 7, "error": {"code": error[0], "message": error[1]}}


def _answered_plain(monkeypatch, raised, version):
    """The ASGI messages ``answer_plain`` sends for a call whose phases raise ``raised``."""

    async def failing(*args, **kwargs):
        raise raised

    monkeypatch.setattr(server, "_call", failing)
    sent = []

    async def receive():
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    async def main():
        door = server._McpDoor(None, answers=None, streams=None)  # type: ignore[arg-type]
        caller = server.Caller(application_id=1, session_id="s")
        replayed = server._Replayed(b"", receive, send)
        params = CallToolRequestParams(name="acme.greet", arguments={})
        await door.answer_plain({"type": "http"}, replayed, caller, 7, version, params)

    anyio.run(main)
    return sent
