import json
import math

from django.conf import settings
from rest_framework import exceptions, parsers

from registry.validation import unstorable_text

# Python's own bound on reading an integer: longer digit strings take quadratic time to read.
MAX_INT_DIGITS = 4300


class PayloadTooLarge(exceptions.APIException):
    status_code = 413
    default_detail = "The request body is too large."
    default_code = "too_large"


class StrictJSONParser(parsers.JSONParser):
    """JSON only, bounded in size and depth; no NaN, no Infinity, no duplicate keys.

    A number too large for a float (``1e999``) or too long for an integer reads as infinity,
    and text may hold a NUL or an unpaired surrogate (``"\\ud800"``): neither can be stored,
    and an unpaired surrogate cannot even be written back in a response. A body that is a list
    is a batch (traces) whose items the endpoint judges one by one, naming each bad item, so
    one bad value never costs the others; any other body is one request and is refused whole,
    naming where.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if length and length.isdigit() and int(length) > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(f"The request body is larger than {limit} bytes.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise exceptions.ParseError(
                f"The body is not valid UTF-8 (byte {exc.start})."
            ) from None
        try:
            data = json.loads(
                text,
                object_pairs_hook=_no_duplicates,
                parse_constant=_no_constant,
                parse_int=_integer,
            )
        except RecursionError:
            raise exceptions.ParseError("The JSON is nested too deeply.") from None
        except ValueError as exc:
            raise exceptions.ParseError(f"The body is not valid JSON: {exc}") from None
        if not isinstance(data, list):
            problem = unstorable_text(data)
            if problem:
                where, _, reason = problem.partition(": ")
                raise exceptions.ValidationError({where: [reason]})
        return data


def _no_duplicates(pairs):
    result = dict(pairs)  # built in C; only an object that lost a key is read again
    if len(result) == len(pairs):
        return result
    seen = set()
    for key, _ in pairs:
        if key in seen:
            shown = repr(key) if len(key) <= 64 else repr(key[:61]) + "..."
            raise ValueError(f"duplicate key {shown}")
        seen.add(key)
    return result


def _no_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def _integer(digits: str) -> int | float:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        return -math.inf if digits.startswith("-") else math.inf
    return int(digits)
