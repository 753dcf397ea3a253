import pytest

from registry.models import RiskLevel
from registry.risk_order import DEFAULT_RISK_RANK, RISK_ORDER
from registry.selectors import risk_ranks


@pytest.mark.django_db
def test_the_default_order_is_the_order_of_the_levels_a_registry_starts_with():
    assert tuple(RiskLevel.objects.order_by("rank").values_list("name", flat=True)) == RISK_ORDER
    ranks = risk_ranks()
    assert sorted(DEFAULT_RISK_RANK, key=DEFAULT_RISK_RANK.__getitem__) == sorted(
        ranks, key=ranks.__getitem__
    )
