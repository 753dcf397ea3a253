import json

from django.db import migrations

SCHEDULES = [
    # task name, task path, every N hours
    ("Refresh contracts from traces", "learning.tasks.refresh_contracts", 1),
    ("Prune old traces", "learning.tasks.prune_traces", 24),
]


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, task, hours in SCHEDULES:
        schedule, _ = IntervalSchedule.objects.get_or_create(every=hours, period="hours")
        PeriodicTask.objects.get_or_create(
            name=name, defaults={"task": task, "interval": schedule, "kwargs": json.dumps({})}
        )


def remove(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(
        name__in=[name for name, _, _ in SCHEDULES]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("learning", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]
    operations = [migrations.RunPython(create, remove)]
