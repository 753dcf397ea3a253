from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo registry, its users and traces, and the synthetic worlds that benchmarks and
    tests share. It sits above every other app (it ties them together) and nothing imports it."""

    name = "demo"
    default_auto_field = "django.db.models.BigAutoField"
