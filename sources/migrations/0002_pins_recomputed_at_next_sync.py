"""Pins are now the hash of each tool exactly as its server sends it (RFC 8785 JCS of the raw
tools/list entry). What was stored cannot give it back (the old pins covered four fields and
no version kept the raw definition), so every declaration's last seen pin is cleared: the next
sync of its server records the definition on the approved version when the contract is
unchanged, without a ticket, and opens one only for a real change (docs/operations.md)."""

from django.db import migrations


def clear_pins(apps, schema_editor):
    DeclaredTool = apps.get_model("sources", "DeclaredTool")
    DeclaredTool.objects.update(definition_hash="")


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0001_mcp_servers"),
        ("registry", "0006_contract_version_declared_definition"),
    ]

    operations = [migrations.RunPython(clear_pins, migrations.RunPython.noop)]
