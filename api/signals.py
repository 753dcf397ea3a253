"""A changed or deleted token must stop authenticating at once, cached or not: it moves the
registry revision, which every cached authentication is keyed on."""

from django.db.models.signals import post_delete, post_save

from registry.signals import revision_bump_on_change

from .models import RuntimeToken

post_save.connect(revision_bump_on_change, sender=RuntimeToken, dispatch_uid="revision-token-save")
post_delete.connect(
    revision_bump_on_change, sender=RuntimeToken, dispatch_uid="revision-token-delete"
)
