import json

from django.core.management.base import BaseCommand, CommandError

from registry.services import ImportInvalid
from reviews.services import registry_import


class Command(BaseCommand):
    help = (
        "Import a registry file (vocabulary + contract documents, or a bare list), all or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="Registry file (JSON)")
        parser.add_argument(
            "--approve",
            action="store_true",
            help="Publish as approved versions at once (an operator's bootstrap).",
        )

    def handle(self, *args, file, approve, **options):
        try:
            with open(file, encoding="utf-8") as handle:
                data = json.load(handle)
        except OSError as exc:
            raise CommandError(f"{file}: {exc.strerror}") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CommandError(f"{file}: not valid JSON: {exc}") from exc
        try:
            result = registry_import(data=data, approve=approve)
        except ImportInvalid as exc:
            for problem in exc.problems:
                self.stderr.write(problem)
            raise CommandError(
                f"{file}: {len(exc.problems)} problem(s); nothing was imported."
            ) from exc
        self.stdout.write(
            f"{result.variables} state variables, {result.permissions} permissions, "
            f"{len(result.published)} published, {len(result.proposed)} proposed for review, "
            f"{len(result.unchanged)} unchanged, {len(result.applications)} applications."
        )
