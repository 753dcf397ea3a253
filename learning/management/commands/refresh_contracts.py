from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from learning.otel_ingest import otel_traces_assemble
from learning.services import REFRESH_CHUNK, tools_refresh, tools_with_new_traces
from registry.models import Tool


class Command(BaseCommand):
    help = (
        "Assemble settled OpenTelemetry traces, fold new traces, infer contracts and judge "
        "drift now, in this process."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tool", help="Only this tool (by name).")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args, tool, no_progress, **options):
        # Spans received but not yet assembled are traces this refresh should see.
        assembled = otel_traces_assemble()
        if assembled:
            self.stdout.write(f"Assembled {assembled} OpenTelemetry trace(s).")
        names = [tool] if tool else tools_with_new_traces()
        tickets = drifted = proposed = 0
        registered = set(Tool.objects.filter(name__in=names).values_list("name", flat=True))
        with tqdm(
            total=len(names), desc="tools", disable=no_progress, file=self.stderr._out
        ) as bar:
            for start in range(0, len(names), REFRESH_CHUNK):
                results = tools_refresh(tool_names=names[start : start + REFRESH_CHUNK])
                for result in results:
                    if tool and result.inferred is None:
                        raise CommandError(f"{tool}: no traces recorded for this tool.")
                    drifted += bool(result.drift)
                    tickets += result.ticket_id is not None
                    proposed += result.ticket_id is not None and result.tool_name not in registered
                bar.update(len(results))
        unregistered = len(names) - len(registered)
        # A name in traces but not in the registry is refreshed too (a shadow tool): say so.
        seen = (
            f": {len(registered)} in the registry and {unregistered} seen only in traces "
            f"(not registered; {proposed} proposed as a new tool)."
            if unregistered
            else "."
        )
        self.stdout.write(
            f"Refreshed {len(names)} tool(s){seen} {drifted} drifted, "
            f"{tickets} with a review ticket."
        )
