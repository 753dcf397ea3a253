from django.contrib.auth.management import create_permissions
from django.db import migrations

# A reviewer judges drift by its traces: the ticket links the runs behind it, the tool's page
# draws its health. Reading them is all the Reviewers group needs here.
CODENAMES = [
    "view_trace", "view_toolstats", "view_tooldaystats", "view_inferredcontract",
    "view_driftreport",
]  # fmt: skip


def grant(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="Reviewers")
    group.permissions.add(
        *Permission.objects.filter(content_type__app_label="learning", codename__in=CODENAMES)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("learning", "0006_tool_days_and_inferred_differences"),
        ("reviews", "0002_reviewers_group"),
    ]
    operations = [migrations.RunPython(grant, migrations.RunPython.noop)]
