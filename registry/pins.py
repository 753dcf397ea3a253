"""The pin of a tool: the hash of the definition its MCP server declares, as the server sent it.

Pure Python (no Django). The pin is SHA-256 (hex) of the RFC 8785 canonical JSON (JCS) of the
tool object exactly as its server sent it in ``tools/list``: every key kept, names, titles,
``_meta`` and keys no SDK knows (such as an ``annotations.category``) included, nothing
defaulted. Any client recomputes it from the raw JSON of the listing with any JCS
implementation, whatever SDK parsed the rest; a runtime or gateway compares it with the
approved pin the registry exports (``_meta`` of ``export/mcp/``, ``definition_hash`` of
``tools/``) and withholds a tool whose server changed it after review.

A contract that no MCP server declared is pinned as the MCP definition the registry serves for
it (``contract_definition``).

JCS in brief: objects with members sorted by the UTF-16 code units of their names, no
whitespace, strings escaped as ECMAScript's ``JSON.stringify`` does (only ``"``, ``\\`` and
controls), numbers as ECMAScript writes an IEEE 754 double (shortest round-trip digits, ``1e+21``
from 10**21 on and below 10**-6), the result encoded in UTF-8. NaN and infinities have no JSON
form and are refused.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any


class NotCanonical(ValueError):
    """A value JCS cannot serialise (a non-finite number, a non-JSON type, a lone surrogate)."""


def canonical_json(value: Any) -> bytes:
    """``value`` (parsed JSON) in RFC 8785 canonical form, UTF-8 encoded."""
    parts: list[str] = []
    _write(value, parts)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotCanonical(f"a string holds a lone surrogate: {exc.reason}") from None


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int | float):
        out.append(es_number(value))
    elif isinstance(value, Mapping):
        out.append("{")
        # JCS sorts names by their UTF-16 code units; big-endian bytes compare the same way.
        for index, key in enumerate(sorted(value, key=_utf16)):
            if not isinstance(key, str):
                raise NotCanonical(f"an object's key is not a string: {key!r}")
            if index:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise NotCanonical(f"not a JSON value: {type(value).__name__}")


def _utf16(key: Any) -> bytes:
    if not isinstance(key, str):
        raise NotCanonical(f"an object's key is not a string: {key!r}")
    return key.encode("utf-16-be", "surrogatepass")


def es_number(number: int | float) -> str:
    """A number as ECMAScript's ``Number.prototype.toString`` writes it (the double nearest
    to ``number``; integers past 2**53 lose precision exactly as in every JSON parser that
    reads doubles)."""
    try:
        value = float(number)
    except OverflowError:
        raise NotCanonical(f"{number} is beyond the range of a double") from None
    if math.isnan(value) or math.isinf(value):
        raise NotCanonical(f"{value} has no JSON form")
    if value == 0:
        return "0"  # and minus zero
    if value < 0:
        return "-" + es_number(-value)
    # repr gives the shortest digits that read back as the same double, as ECMAScript requires.
    _, figures, exponent = Decimal(repr(value)).normalize().as_tuple()
    digits = "".join(map(str, figures))
    point = len(digits) + int(exponent)  # value = 0.DIGITS × 10**point
    count = len(digits)
    if count <= point <= 21:
        return digits + "0" * (point - count)
    if 0 < point <= 21:
        return digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    shown = point - 1
    sign = "+" if shown >= 0 else "-"
    head = digits[0] + ("." + digits[1:] if count > 1 else "")
    return f"{head}e{sign}{abs(shown)}"


def definition_hash(definition: Mapping[str, Any]) -> str:
    """The pin of an MCP tool definition: SHA-256 (hex) of its JCS form, every key kept."""
    return hashlib.sha256(canonical_json(definition)).hexdigest()


def contract_definition(document: Mapping[str, Any]) -> dict[str, Any]:
    """The MCP definition a contract document stands for (the registry's name kept): what the
    registry serves for a contract no server declared. Annotations only when declared."""
    definition: dict[str, Any] = {
        "name": document["name"],
        "description": document.get("description") or "",
        "inputSchema": document.get("input_schema") or {"type": "object"},
    }
    if document.get("output_schema"):
        definition["outputSchema"] = document["output_schema"]
    if document.get("annotations"):
        definition["annotations"] = document["annotations"]
    return definition


def contract_pin(document: Mapping[str, Any]) -> str:
    """The pin of a contract no MCP server declared: the hash of ``contract_definition``."""
    return definition_hash(contract_definition(document))
