from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from registry.models import Application
from registry.revision import revision_bump

from .models import RuntimeToken


@transaction.atomic
def runtime_token_create(
    *,
    application_name: str,
    scopes: list[str],
    name: str = "",
    expires_at: datetime | None = None,
) -> tuple[RuntimeToken, str]:
    """A new token, and its application (everything allowed) if missing; the raw token once."""
    unknown = sorted(set(scopes) - set(RuntimeToken.Scope.values))
    if unknown:
        raise ValueError(f"unknown scope(s): {', '.join(unknown)}")
    application, _ = Application.objects.get_or_create(
        name=application_name,
        defaults={"all_tools": True, "all_permissions": True, "max_risk": None},
    )
    application.full_clean()
    raw = RuntimeToken.generate()
    token = RuntimeToken.objects.create(
        application=application,
        name=name,
        prefix=raw[:12],
        token_hash=RuntimeToken.hash(raw),
        scopes=sorted(set(scopes)),
        expires_at=expires_at,
    )
    return token, raw


@transaction.atomic
def runtime_tokens_revoke(*, tokens: QuerySet[RuntimeToken]) -> int:
    """Revoke the tokens not yet revoked; return how many. Cached authentications end with it."""
    count = tokens.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
    if count:
        revision_bump()
    return count
