import json

from django.conf import settings
from rest_framework import exceptions, parsers


class PayloadTooLarge(exceptions.APIException):
    status_code = 413
    default_detail = "The request body is too large."
    default_code = "too_large"


class StrictJSONParser(parsers.JSONParser):
    """JSON only, bounded in size and depth; no NaN, no Infinity, no duplicate keys."""

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
            return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        except RecursionError:
            raise exceptions.ParseError("The JSON is nested too deeply.") from None
        except ValueError as exc:
            raise exceptions.ParseError(f"The body is not valid JSON: {exc}") from None


def _no_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constant(name):
    raise ValueError(f"{name} is not valid JSON")
