from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from api.models import RuntimeToken
from api.services import runtime_token_create


class Command(BaseCommand):
    help = "Create a runtime token for an application (created if missing) and print it once."

    def add_arguments(self, parser):
        parser.add_argument("--application", required=True, help="Application name (a slug).")
        parser.add_argument(
            "--scopes",
            nargs="+",
            default=list(RuntimeToken.Scope.values),
            choices=list(RuntimeToken.Scope.values),
            help="Default: every scope.",
        )
        parser.add_argument("--name", default="", help="A label to tell tokens apart.")
        parser.add_argument("--expires-in-days", type=int, default=None)

    def handle(self, *args, application, scopes, name, expires_in_days, **options):
        expires_at = None
        if expires_in_days is not None:
            if expires_in_days <= 0:
                raise CommandError("--expires-in-days must be positive")
            expires_at = timezone.now() + timedelta(days=expires_in_days)
        try:
            token, raw = runtime_token_create(
                application_name=application, scopes=scopes, name=name, expires_at=expires_at
            )
        except (ValueError, ValidationError) as exc:
            raise CommandError(f"--application {application!r}: {exc}") from exc
        self.stdout.write(
            f"Runtime token for application {token.application.name} "
            f"(scopes: {', '.join(token.scopes)}); it is shown only now:"
        )
        self.stdout.write(raw)
