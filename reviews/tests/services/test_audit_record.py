"""``reviews.services.audit_record``: the audit trail is append-only."""

import pytest

from reviews.models import AuditEntry, ReviewError

pytestmark = pytest.mark.django_db


def test_audit_entries_cannot_be_changed_or_deleted(published):
    entry = AuditEntry.objects.first()
    entry.action = "approved"
    with pytest.raises(ReviewError):
        entry.save()
    with pytest.raises(ReviewError):
        entry.delete()
    with pytest.raises(ReviewError):
        AuditEntry.objects.all().delete()
    with pytest.raises(ReviewError):
        AuditEntry.objects.update(action="x")
