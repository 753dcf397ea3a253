"""One error shape for every 4xx and 5xx: {"error": {"code", "message", "fields"}}."""

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import DataError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from .planning import SchemaTooCostly

logger = logging.getLogger(__name__)

CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "too_large",
    415: "unsupported_media_type",
    422: "unprocessable",
    429: "throttled",
    503: "unavailable",
}


def error_body(
    status_code: int, message: str, fields: dict[str, Any] | None = None, code: str | None = None
) -> dict[str, Any]:
    return {
        "error": {
            "code": code or CODES.get(status_code, "error"),
            "message": message,
            "fields": fields or {},
        }
    }


def error_message(body: dict[str, Any]) -> str:
    """An ``error_body`` as one sentence: its message, then each field's reasons."""
    error = body["error"]
    reasons = "; ".join(f"{name}: {' '.join(why)}" for name, why in error["fields"].items())
    return f"{error['message']} {reasons}" if reasons else error["message"]


def _flatten(detail, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as {"field.path": [reasons]}."""
    fields: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            for sub, reasons in _flatten(value, name).items():
                fields.setdefault(sub, []).extend(reasons)
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            fields[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                for sub, reasons in _flatten(item, f"{prefix}[{index}]").items():
                    fields.setdefault(sub, []).extend(reasons)
    else:
        fields[prefix or "non_field_errors"] = [str(detail)]
    return fields


def exception_handler(exc, context):
    # Only a lost or refused connection is "unavailable": a 503 tells the caller to send the
    # same request again, which for a value the database refuses would fail forever.
    if isinstance(exc, OperationalError | InterfaceError):
        logger.warning("database unavailable: %s: %s", type(exc).__name__, exc)
        return Response(
            error_body(503, "The registry's database is unavailable; retry shortly."),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "5"},
        )
    if isinstance(exc, DataError):
        # Input checks refuse such values before any query; one that slips through is still
        # the request's value, not an outage. Other database errors are faults: a 500.
        logger.warning("the database refused a value: %s: %s", type(exc).__name__, exc)
        return Response(
            error_body(400, "The request holds a value the database cannot store or compare."),
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            error_body(413, f"The request body is larger than {limit} bytes."), status=413
        )
    if isinstance(exc, RecursionError):
        # A value nested past Python's own limit, found by a recursive reader: the request's.
        return Response(error_body(400, "The request is nested too deeply."), status=400)
    if isinstance(exc, SchemaTooCostly):
        field = f"plan[{exc.step}]" if exc.step is not None else "plan"
        return Response(
            error_body(422, str(exc), {field: [str(exc)]}, code="schema_too_costly"), status=422
        )
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    if isinstance(exc, exceptions.ValidationError):
        message = "The request is not valid."
        fields = _flatten(detail)
    else:
        message = str(detail.get("detail", detail)) if isinstance(detail, dict) else str(detail)
        fields = {}
    code = (
        getattr(exc, "default_code", None)
        if not isinstance(exc, exceptions.ValidationError)
        else None
    )
    response.data = error_body(
        response.status_code, message, fields, code=CODES.get(response.status_code, code)
    )
    return response
