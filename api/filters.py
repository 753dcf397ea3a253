import django_filters
from django.db.models import Q
from rest_framework.exceptions import ValidationError

from registry.models import ContractVersion, RiskLevel


class ContractFilter(django_filters.FilterSet):
    risk = django_filters.CharFilter(field_name="risk__name", help_text="Exactly this risk level.")
    max_risk = django_filters.CharFilter(
        method="filter_max_risk", help_text="At most this risk level."
    )
    permission = django_filters.CharFilter(
        method="filter_permission", help_text="Needs this permission."
    )
    requires = django_filters.CharFilter(
        method="filter_requires", help_text="Requires this variable."
    )
    produces = django_filters.CharFilter(
        method="filter_produces", help_text="Produces this variable."
    )
    domain = django_filters.CharFilter(
        method="filter_domain", help_text="Name prefix, e.g. calendar."
    )
    search = django_filters.CharFilter(
        method="filter_search", help_text="Text in name or description."
    )

    class Meta:
        model = ContractVersion
        fields: list[str] = []

    def filter_max_risk(self, queryset, name, value):
        rank = RiskLevel.objects.filter(name=value).values_list("rank", flat=True).first()
        if rank is None:
            raise ValidationError({"max_risk": [f"unknown risk level {value!r}"]})
        return queryset.filter(risk__rank__lte=rank)

    def _json_has(self, queryset, field, value):
        # The quoted name inside the JSON list's text: portable across SQLite and PostgreSQL.
        return queryset.filter(**{f"{field}__icontains": f'"{value}"'})

    def filter_permission(self, queryset, name, value):
        return self._json_has(queryset, "permissions", value)

    def filter_requires(self, queryset, name, value):
        return self._json_has(queryset, "requires", value)

    def filter_produces(self, queryset, name, value):
        return self._json_has(queryset, "produces", value)

    def filter_domain(self, queryset, name, value):
        return queryset.filter(tool__name__startswith=value)

    def filter_search(self, queryset, name, value):
        return queryset.filter(Q(tool__name__icontains=value) | Q(description__icontains=value))
