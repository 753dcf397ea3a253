"""OTLP/HTTP, the wire side (pure: no Django): media types, bounded decompression, answers.

What the OTLP specification asks of a receiver, and how this one does it:

- Bodies are ``application/x-protobuf`` or ``application/json`` (OTLP/JSON); any other
  ``Content-Type`` is ``415``. ``Content-Encoding: gzip`` (or ``deflate``, which the
  OpenTelemetry Python exporter also offers) is inflated incrementally, never past the body
  limit: a body inflating beyond it is ``413`` after at most the limit's worth of output.
- Success is ``200`` with an ``ExportTraceServiceResponse`` in the request's encoding; when
  spans were refused it carries ``partial_success`` with ``rejected_spans`` and an
  ``error_message`` naming each reason. Failures carry a ``google.rpc.Status`` in the request's
  encoding. Only ``429`` and ``503`` (with ``Retry-After``) invite the exporter to retry.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from learning.otel import MalformedRequest, request_from_json, request_from_protobuf

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MEDIA_TYPES = (PROTOBUF, JSON)
ENCODINGS = ("gzip", "deflate", "identity")
# google.rpc.Code for each HTTP status this receiver answers (OTLP carries a Status message).
RPC_CODES = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    403: code_pb2.PERMISSION_DENIED,
    404: code_pb2.NOT_FOUND,
    405: code_pb2.UNIMPLEMENTED,
    413: code_pb2.INVALID_ARGUMENT,
    415: code_pb2.INVALID_ARGUMENT,
    429: code_pb2.RESOURCE_EXHAUSTED,
    500: code_pb2.INTERNAL,
    503: code_pb2.UNAVAILABLE,
}


class OTLPError(Exception):
    """An answer other than 200: its HTTP status and what to tell the sender."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def media_type(content_type: str | None) -> str:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in MEDIA_TYPES:
        shown = media[:100] or "none"
        raise OTLPError(
            415, f"Content-Type {shown!r} is not supported; send {PROTOBUF} or {JSON} (OTLP/HTTP)"
        )
    return media


def inflate(body: bytes, content_encoding: str | None, *, limit: int) -> bytes:
    """The body without its content encoding, refused (413) past ``limit`` bytes inflated.

    Inflating asks zlib for at most ``limit + 1`` bytes at a time, so a gzip bomb costs the
    limit in memory and the limit's worth of work, whatever it would have expanded to.
    """
    encoding = (content_encoding or "").strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ENCODINGS:
        raise OTLPError(
            415, f"Content-Encoding {encoding[:50]!r} is not supported; send gzip, deflate or none"
        )
    output = bytearray()
    data = body
    while data:
        # 32 + 15: zlib reads either header, gzip's or zlib's (what exporters call deflate).
        inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)
        try:
            output += inflater.decompress(data, limit + 1 - len(output))
        except zlib.error as exc:
            raise OTLPError(400, f"The body is not valid {encoding}: {exc}") from None
        if len(output) > limit or inflater.unconsumed_tail:
            raise OTLPError(413, f"The body inflates to more than {limit} bytes.")
        if not inflater.eof:
            raise OTLPError(400, f"The body is not valid {encoding}: it ends early")
        data = inflater.unused_data  # gzip allows several members one after another
    return bytes(output)


def request_decode(body: bytes, media: str) -> ExportTraceServiceRequest:
    try:
        if media == PROTOBUF:
            return request_from_protobuf(body)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OTLPError(400, f"The body is not valid UTF-8 (byte {exc.start}).") from None
        try:
            data = json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            raise OTLPError(400, "The JSON is nested too deeply.") from None
        except ValueError as exc:
            raise OTLPError(400, f"The body is not valid JSON: {exc}") from None
        return request_from_json(data)
    except MalformedRequest as exc:
        raise OTLPError(400, str(exc)) from None


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def export_response(media: str, *, rejected: int, message: str) -> bytes:
    response = ExportTraceServiceResponse()
    if rejected or message:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    return _encode(response, media)


def status_response(media: str, *, status: int, message: str) -> bytes:
    code = RPC_CODES.get(status, code_pb2.UNKNOWN)
    return _encode(status_pb2.Status(code=code, message=message), media)


def _encode(message: Any, media: str) -> bytes:
    if media == PROTOBUF:
        return bytes(message.SerializeToString())
    return json.dumps(json_format.MessageToDict(message)).encode()
