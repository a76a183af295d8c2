"""A history line's details are stored under the store's own names, and read back from rows of any release
(issue 23: the wire's spelling is the API's, not the store's)."""

from __future__ import annotations

import json

from oncegate.entrypoints.render import wire_details
from oncegate.stores import row_reading, row_writing
from tests.support import records

DETAILS = {
    "target_record_id": "ERP-1",
    "data": {"targetRecordId": "the flow's own field, kept as sent"},
    "previous": {"status": "succeeded", "target_record_id": "ERP-0", "data": {"conflict_id": "also the flow's"}},
    "conflict_id": "c1",
    "erpAmount": 12.5,
}


def test_details_are_stored_under_the_store_s_names_and_the_flow_s_data_is_never_renamed() -> None:
    row = row_writing.event_to_row(records.event("claim-1", details=DETAILS))

    assert json.loads(row["Details"]) == {
        "TargetRecordId": "ERP-1",
        "Data": {"targetRecordId": "the flow's own field, kept as sent"},
        "Previous": {"Status": "succeeded", "TargetRecordId": "ERP-0", "Data": {"conflict_id": "also the flow's"}},
        "ConflictId": "c1",
        "erpAmount": 12.5,
    }
    assert row_reading.event_from_row(row).details == DETAILS


def test_rows_of_earlier_releases_in_the_api_s_spelling_read_the_same() -> None:
    row = row_writing.event_to_row(records.event("claim-1"))
    row["Details"] = json.dumps({"targetRecordId": "ERP-1", "previousStatus": "unknown", "note": "checked"})

    read = row_reading.event_from_row(row).details

    assert read == {"target_record_id": "ERP-1", "previous_status": "unknown", "note": "checked"}
    assert wire_details(read) == {"targetRecordId": "ERP-1", "previousStatus": "unknown", "note": "checked"}
