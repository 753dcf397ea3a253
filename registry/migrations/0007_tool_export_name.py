"""Tools get the function name the exports give them, unique; names are checked whole."""

import django.core.validators
from django.db import migrations, models


def fill_export_names(apps, schema_editor):
    Tool = apps.get_model("registry", "Tool")
    seen: dict[str, str] = {}
    clashes = []
    for tool in Tool.objects.order_by("pk").only("pk", "name"):
        exported = tool.name.replace(".", "__")  # registry.validation.export_name
        if exported in seen:
            clashes.append(f"{seen[exported]!r} and {tool.name!r} both export as {exported!r}")
        seen[exported] = tool.name
        tool.export_name = exported
        tool.save(update_fields=["export_name"])
    if clashes:
        raise RuntimeError(
            "Tools a model could not tell apart: " + "; ".join(clashes) + ". Rename or remove "
            "one of each pair (with its versions and tickets), then migrate again."
        )


class Migration(migrations.Migration):
    dependencies = [
        ("registry", "0006_contract_version_declared_definition"),
    ]

    operations = [
        migrations.AddField(
            model_name="tool",
            name="export_name",
            field=models.CharField(editable=False, max_length=200, null=True),
        ),
        migrations.RunPython(fill_export_names, migrations.RunPython.noop, elidable=False),
        migrations.AlterField(
            model_name="tool",
            name="export_name",
            field=models.CharField(editable=False, max_length=200, unique=True),
        ),
        migrations.AlterField(
            model_name="statevariable",
            name="name",
            field=models.CharField(
                max_length=100,
                unique=True,
                validators=[django.core.validators.RegexValidator("^[A-Za-z_][A-Za-z0-9_.-]*\\Z")],
            ),
        ),
        migrations.AlterField(
            model_name="tool",
            name="name",
            field=models.CharField(
                max_length=200,
                unique=True,
                validators=[
                    django.core.validators.RegexValidator(
                        "^[A-Za-z][A-Za-z0-9_-]*(\\.[A-Za-z0-9_-]+)*\\Z"
                    )
                ],
            ),
        ),
    ]
