"""McpServer.last_sync_report has the shape learning.shapes.SyncRecord names."""

from dataclasses import fields

from learning.shapes import SyncRecord
from sources.services import SyncReport


def test_the_sync_record_names_every_field_of_a_sync_report():
    record = SyncReport(server="acme", proposed=[f"acme.t{i}" for i in range(300)]).as_record()
    assert set(record) == SyncRecord.__required_keys__ == {f.name for f in fields(SyncReport)}
    assert len(record["proposed"]) == 200  # each list cut (MAX_REPORTED)
