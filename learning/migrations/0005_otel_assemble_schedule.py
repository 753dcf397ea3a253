import json

from django.db import migrations

NAME = "Assemble OpenTelemetry traces"
TASK = "learning.tasks.otel_traces_assemble"
EVERY_SECONDS = 30  # below OTLP_QUIET_SECONDS: a trace whose root never came waits at most both


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    schedule, _ = IntervalSchedule.objects.get_or_create(every=EVERY_SECONDS, period="seconds")
    PeriodicTask.objects.get_or_create(
        name=NAME, defaults={"task": TASK, "interval": schedule, "kwargs": json.dumps({})}
    )


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("learning", "0004_otel_spans"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create, remove)]
