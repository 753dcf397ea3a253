"""The runtime-token admin: its one action needs the permission its button stands for."""

import pytest
from django.contrib.auth.models import Permission as AuthPermission
from django.urls import reverse

from api.services import runtime_token_create

pytestmark = pytest.mark.django_db


def test_it_refuses_revoking_tokens_to_staff_who_may_only_view_them(client, outsider):
    token, _ = runtime_token_create(application_name="assistant", scopes=["contracts:read"])
    outsider.user_permissions.set(AuthPermission.objects.filter(codename="view_runtimetoken"))
    client.force_login(outsider)
    url = reverse("admin:api_runtimetoken_changelist")
    assert 'value="revoke"' not in client.get(url).content.decode()
    response = client.post(url, {"action": "revoke", "_selected_action": [token.pk]}, follow=True)
    assert response.status_code in (200, 403)
    token.refresh_from_db()
    assert token.revoked_at is None
