from pathlib import Path

from django.apps import AppConfig
from django.conf import settings

from .risk import VERBS_FILE, vocabulary_load
from .signals import tool_stats_changed, traces_stored


class LearningConfig(AppConfig):
    name = "learning"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # An operator's verb lexicon is read now: a bad file stops start-up with its reason.
        # Only read: the lexicon is built on first use (learning.selectors.risk_lexicon).
        extra = [Path(settings.RISK_VERBS_FILE)] if settings.RISK_VERBS_FILE else []
        vocabulary_load(VERBS_FILE, *extra)

        # Receivers connect once the app registry is ready: Django's documented place.
        from .tasks import tool_refresh_soon, traces_fold_soon

        tool_stats_changed.connect(tool_refresh_soon, dispatch_uid="learning-refresh-soon")
        traces_stored.connect(traces_fold_soon, dispatch_uid="learning-fold-soon")
