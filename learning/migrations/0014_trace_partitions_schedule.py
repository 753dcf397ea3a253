import json

from django.db import migrations

NAME = "Create trace partitions ahead"
TASK = "learning.tasks.trace_partitions_ensure"
EVERY_HOURS = 1  # the days are created a week ahead: many missed runs cost nothing


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    schedule, _ = IntervalSchedule.objects.get_or_create(every=EVERY_HOURS, period="hours")
    PeriodicTask.objects.get_or_create(
        name=NAME, defaults={"task": TASK, "interval": schedule, "kwargs": json.dumps({})}
    )


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("learning", "0013_traces_partitioned_by_day"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create, remove)]
