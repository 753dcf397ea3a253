from .models import InferredContract


def inferred_contracts_export() -> list[dict]:
    """The latest inferred contract of each tool, as contract documents with their support."""
    return [
        {**inferred.document, "support": inferred.support}
        for inferred in InferredContract.objects.order_by("tool_name")
    ]
