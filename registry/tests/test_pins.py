"""The pin: SHA-256 of the RFC 8785 (JCS) canonical JSON of a tool as its server sent it."""

import hashlib
import json
import struct

import pytest

from registry.pins import NotCanonical, canonical_json, definition_hash, es_number
from tests.helpers import APPENDIX_B


@pytest.mark.parametrize(("ieee", "expected"), APPENDIX_B)
def test_it_writes_numbers_as_rfc_8785_appendix_b_does(ieee, expected):
    assert es_number(struct.unpack(">d", bytes.fromhex(ieee))[0]) == expected


@pytest.mark.parametrize("ieee", ["7fffffffffffffff", "7ff0000000000000"])
def test_it_refuses_nan_and_infinity(ieee):
    with pytest.raises(NotCanonical):
        canonical_json([struct.unpack(">d", bytes.fromhex(ieee))[0]])


def test_it_canonicalises_the_rfcs_example_of_section_3_2_2():
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        r' "string": "\u20ac$\u000F\u000aA' + "'" + r'\u0042\u0022\u005c\\\"\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(json.loads(source)) == expected.encode()


def test_it_sorts_names_by_utf16_code_units_as_section_3_2_3_does():
    source = (
        r'{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet",'
        r' "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control",'
        r' "\u00f6": "Latin Small Letter O With Diaeresis"}'
    )
    names = list(json.loads(canonical_json(json.loads(source))))
    assert names == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_it_writes_integers_as_the_doubles_every_json_parser_reads():
    assert canonical_json([1, -0, 10**21, 2**53 + 1, 1.0]) == b"[1,0,1e+21,9007199254740992,1]"


def test_the_pin_keeps_every_key_the_server_sent():
    raw = {
        "name": "click",
        "description": "Clicks.",
        "inputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": False, "category": "Input automation"},
        "outputSchema": None,
    }
    assert definition_hash(raw) == hashlib.sha256(canonical_json(raw)).hexdigest()
    without_unknown = {**raw, "annotations": {"readOnlyHint": False}}
    assert definition_hash(without_unknown) != definition_hash(raw)
    without_null = {key: value for key, value in raw.items() if key != "outputSchema"}
    assert definition_hash(without_null) != definition_hash(raw)
    reordered = dict(reversed(list(raw.items())))
    assert definition_hash(reordered) == definition_hash(raw)
