from .models import DriftReport, InferredContract


def inferred_contracts_export() -> list[dict]:
    """The latest inferred contract of each tool, as contract documents with their support."""
    return [
        {**inferred.document, "support": inferred.support}
        for inferred in InferredContract.objects.order_by("tool_name")
    ]


def drift_reports_recent(*, limit: int = 8) -> list[DriftReport]:
    """The latest drift reports with their tool, base version and ticket, in one query."""
    return list(
        DriftReport.objects.select_related("tool", "base", "ticket").order_by("-updated_at", "-pk")[
            :limit
        ]
    )
