import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from learning.selectors import inferred_contracts_export
from registry.services import contracts_export


class Command(BaseCommand):
    help = "Print the approved contracts (or, with --inferred, the latest inferred) as a JSON list."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--inferred",
            action="store_true",
            help="The latest inferred contract of each tool instead of the approved one.",
        )

    def handle(self, *args: Any, inferred: bool, **options: Any) -> None:
        documents = inferred_contracts_export() if inferred else contracts_export()
        self.stdout.write(json.dumps(documents, indent=2, ensure_ascii=False))
