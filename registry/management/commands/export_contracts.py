import json

from django.core.management.base import BaseCommand

from registry.services import contracts_export


class Command(BaseCommand):
    help = "Print the approved contracts (or, with --inferred, the latest inferred) as a JSON list."

    def add_arguments(self, parser):
        parser.add_argument(
            "--inferred",
            action="store_true",
            help="The latest inferred contract of each tool instead of the approved one.",
        )

    def handle(self, *args, inferred, **options):
        if inferred:
            from learning.selectors import inferred_contracts_export

            documents = inferred_contracts_export()
        else:
            documents = contracts_export()
        self.stdout.write(json.dumps(documents, indent=2, ensure_ascii=False))
