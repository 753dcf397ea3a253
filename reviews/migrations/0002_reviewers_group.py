from django.contrib.auth.management import create_permissions
from django.db import migrations

# What a reviewer needs in the admin: read and propose contracts, decide and comment on tickets.
PERMISSIONS = {
    "registry": [
        "view_tool", "add_tool", "view_contractversion", "change_contractversion",
        "add_contractversion", "view_statevariable", "view_risklevel", "view_permission",
        "view_application", "view_planningpolicy",
    ],
    "reviews": [
        "view_reviewticket", "change_reviewticket", "view_approval", "view_comment",
        "add_comment", "view_auditentry",
    ],
}  # fmt: skip


def create(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="Reviewers")
    for app_label, codenames in PERMISSIONS.items():
        group.permissions.add(
            *Permission.objects.filter(content_type__app_label=app_label, codename__in=codenames)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0001_initial"),
        ("registry", "0002_risk_levels"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(create, migrations.RunPython.noop)]
