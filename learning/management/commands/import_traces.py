import json
import os
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from learning.ingest import traces_ingest
from registry.models import Application


class Command(BaseCommand):
    help = "Import traces from a JSON Lines file: batched, idempotent, every bad line reported."

    def add_arguments(self, parser):
        parser.add_argument("file", help="One trace (JSON object) a line")
        parser.add_argument(
            "--application",
            default=None,
            help="Attribute the file to this application (its visibility and allowance apply); "
            "without it the import is an operator's, trusted with every tool.",
        )
        parser.add_argument("--batch-size", type=int, default=None)
        parser.add_argument("--no-progress", action="store_true", help="Hide the progress bar.")

    def handle(self, *args, file, application, batch_size, no_progress, **options):
        owner = None
        if application is not None:
            owner = Application.objects.filter(name=application).first()
            if owner is None:
                known = ", ".join(Application.objects.values_list("name", flat=True)) or "none"
                raise CommandError(f"--application: no application {application!r}; known: {known}")
        try:
            handle = open(file, "rb")  # noqa: SIM115 - closed below; binary so a bad byte is one bad line
        except OSError as exc:
            raise CommandError(f"{file}: {exc.strerror}") from exc
        bad_json: list[dict[str, Any]] = []
        with handle, tqdm(
            total=os.path.getsize(file), unit="B", unit_scale=True, disable=no_progress,
            desc="traces", file=self.stderr._out,
        ) as progress:  # fmt: skip

            def lines() -> Iterator[tuple[int, Any]]:
                for number, raw in enumerate(handle, start=1):
                    progress.update(len(raw))
                    if not raw.strip():
                        continue
                    try:
                        yield number, json.loads(raw)
                    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                        bad_json.append(
                            {"index": number, "field": "(line)", "reason": f"not valid JSON: {exc}"}
                        )

            result = traces_ingest(items=lines(), application=owner, batch_size=batch_size)
        problems = sorted(bad_json + result.rejected, key=lambda p: p["index"])
        for problem in problems:
            self.stderr.write(f"line {problem['index']}: {problem['field']}: {problem['reason']}")
        self.stdout.write(
            f"{result.accepted} traces stored, {result.duplicates} duplicates skipped, "
            f"{len({p['index'] for p in problems})} bad lines."
        )
        if problems:
            bad = len({p["index"] for p in problems})
            raise CommandError(f"{file}: {bad} bad line(s); the valid lines were stored.")
