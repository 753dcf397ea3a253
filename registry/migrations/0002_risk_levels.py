from django.db import migrations

RISK_LEVELS = [
    # name, rank, approvals_required, ticket_on_drift, auto_approve_inferred, min_support, description
    ("low", 10, 1, False, False, 30, "Reads and pure computation; no lasting effect."),
    ("medium", 20, 1, False, False, 30, "Writes that can be undone."),
    ("high", 30, 2, True, False, 30, "Deletes, sends, moves money or grants access."),
]


def create(apps, schema_editor):
    RiskLevel = apps.get_model("registry", "RiskLevel")
    for name, rank, approvals, on_drift, auto, support, description in RISK_LEVELS:
        RiskLevel.objects.update_or_create(
            name=name,
            defaults={
                "rank": rank,
                "approvals_required": approvals,
                "ticket_on_drift": on_drift,
                "auto_approve_inferred": auto,
                "min_support": support,
                "description": description,
            },
        )
    apps.get_model("registry", "Revision").objects.get_or_create(pk=1)


class Migration(migrations.Migration):
    dependencies = [("registry", "0001_initial")]
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
