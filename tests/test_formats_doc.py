"""docs/formats.md names exactly the fields the code reads: a field added to the contract
document or the trace without its line in the doc fails here."""

import re
import typing
from pathlib import Path
from typing import NotRequired

from api.serializers import TraceIn
from learning.traces import FIELDS as TRACE_FIELDS
from registry.contract import KNOWN_KEYS, ContractDocument

FORMATS = Path(__file__).resolve().parent.parent / "docs" / "formats.md"
ROW = re.compile(r"^\| `(\w+)` \| (yes|no) \|", re.MULTILINE)


def section(title: str) -> str:
    text = FORMATS.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_it_lists_every_field_of_a_contract_document_and_which_are_required():
    rows = dict(ROW.findall(section("Contract document")))
    assert set(rows) == KNOWN_KEYS
    # Read from the annotations: contract.py's postponed annotations hide NotRequired from
    # __required_keys__.
    hints = typing.get_type_hints(ContractDocument, include_extras=True)
    required = {name for name, hint in hints.items() if typing.get_origin(hint) is not NotRequired}
    assert {name for name, needed in rows.items() if needed == "yes"} == required


def test_its_trace_example_has_every_field_the_api_reads():
    trace = section("Trace")
    fields = TraceIn().fields
    assert set(fields) == TRACE_FIELDS  # the API's schema documents what ingest reads
    assert all(f'"{name}"' in trace for name in fields)
    required = sorted(name for name, field in fields.items() if field.required)
    assert required == sorted(["trace_id", "step", "tool", "status"])
    assert all(f"`{name}`" in trace.split("are required")[0] for name in required)
