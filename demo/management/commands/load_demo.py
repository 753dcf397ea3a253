import io
import json
import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from demo.traces import demo_traces
from learning.ingest import traces_ingest
from registry.models import Tool
from reviews.models import ReviewTicket
from reviews.services import contract_propose, registry_import

DEMO_FILE = Path(__file__).resolve().parents[2] / "registry.json"
WELCOME_FILE = "welcome.txt"
DEMO_USERS = [
    # username, password, superuser, reviewer
    ("admin", "admin-demo-2026", True, True),
    ("reviewer", "reviewer-demo-2026", False, True),
    ("proposer", "proposer-demo-2026", False, False),
]


class Command(BaseCommand):
    help = "Load the demo registry, users, traces and inferred contracts (safe to run twice)."

    def add_arguments(self, parser):
        parser.add_argument("--no-traces", action="store_true", help="Skip demo traces.")
        parser.add_argument(
            "--welcome",
            action="store_true",
            help="Also create a runtime token for the demo application and write the logins "
            "and the token to var/welcome.txt, which `serve --welcome` prints once the server "
            "is up (and then deletes).",
        )

    def handle(self, *args, no_traces, welcome=False, **options):
        with transaction.atomic():
            result = registry_import(data=json.loads(DEMO_FILE.read_text()), approve=True)
            self._users()
            self._proposal()
        self.stdout.write(
            f"Demo registry: {len(result.published)} tools published, "
            f"{len(result.unchanged)} already there, {len(result.applications)} applications."
        )
        if not no_traces:
            self._traces()
        if welcome:
            self._welcome()
            return
        self.stdout.write(self.style.SUCCESS("Admin login: admin / admin-demo-2026"))
        self.stdout.write(
            "Second reviewer: reviewer / reviewer-demo-2026; "
            "proposer: proposer / proposer-demo-2026"
        )

    def _welcome(self) -> None:
        """The lines a person needs after `make run`, kept for the server to print last
        (``serve`` puts the address it listens on in place of ``{address}``)."""
        out = io.StringIO()
        # A command, not an import: the API's token service lives beside the demo, not below.
        call_command("create_runtime_token", application="assistant", name="demo", stdout=out)
        token = out.getvalue().strip().splitlines()[-1]
        lines = [
            "Admin:      http://{address}/admin/  (admin / admin-demo-2026)",
            "Reviewer:   reviewer / reviewer-demo-2026  (a second reviewer)",
            "Proposer:   proposer / proposer-demo-2026",
            f"Runtime token (application assistant, shown once): {token}",
            "API docs:   http://{address}/api/v1/docs/",
        ]
        if settings.EMAIL_BACKEND == "config.mail.OutboxEmailBackend":
            outbox = Path(getattr(settings, "EMAIL_FILE_PATH", "var/mail")) / "outbox.log"
            shown = os.path.relpath(outbox) if outbox.is_relative_to(Path.cwd()) else outbox
            lines.insert(-1, f"E-mails:    {shown}")
        path = Path(settings.VAR_DIR) / WELCOME_FILE
        path.touch(mode=0o600)
        path.write_text("\n".join(lines) + "\n")
        self.stdout.write("Demo logins and a runtime token: printed when the server is up.")

    def _users(self) -> None:
        reviewers = Group.objects.get(name="Reviewers")
        User = get_user_model()
        for username, password, superuser, reviewer in DEMO_USERS:
            user, created = User.objects.get_or_create(
                username=username,
                defaults={
                    "email": f"{username}@example.com",
                    "is_staff": True,
                    "is_superuser": superuser,
                },
            )
            if created:
                user.set_password(password)
                user.save()
            if reviewer:
                user.groups.add(reviewers)

    def _proposal(self) -> None:
        """One open change by the proposer, so a reviewer has a diff to look at."""
        tool = Tool.objects.get(name="calendar.find_events")
        if ReviewTicket.objects.filter(tool=tool, kind=ReviewTicket.Kind.CHANGE).exists():
            return
        if tool.current_version is None:
            return
        document = tool.current_version.document()
        document["description"] += " Results are ordered by start time, soonest first."
        document["input_schema"]["properties"]["include_cancelled"] = {
            "type": "boolean",
            "description": "Also return cancelled events (default false).",
        }
        contract_propose(
            document=document, author=get_user_model().objects.get(username="proposer")
        )

    def _traces(self) -> None:
        registry = json.loads(DEMO_FILE.read_text())
        result = traces_ingest(items=enumerate(demo_traces(registry)))
        self.stdout.write(
            f"Demo traces: {result.accepted} stored, {result.duplicates} already there."
        )
        call_command("refresh_contracts", stdout=self.stdout, stderr=self.stderr)
