"""Runtime authentication: ``Authorization: Bearer <token>``, tokens owned by an Application."""

from dataclasses import dataclass

from django.core.cache import cache
from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from registry.models import Application
from registry.revision import revision_current

from .models import RuntimeToken

TOKEN_CACHE_SECONDS = 60


@dataclass
class Runtime:
    """The request's user when a runtime token authenticated it."""

    application: Application
    token: RuntimeToken

    is_authenticated = True
    is_staff = False

    @property
    def scopes(self) -> set[str]:
        return set(self.token.scopes)


class RuntimeTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Send 'Authorization: Bearer <token>'.")
        try:
            raw = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("The token is not valid.") from None
        digest = RuntimeToken.hash(raw)
        # Keyed by the token alone: saving, revoking or deleting it drops this entry when the
        # change commits (RuntimeToken's save and queryset), so the next request anywhere reads
        # it again. The entry also carries the revision it was read at, because the token brings
        # its application along and an application's changes move the revision.
        key = RuntimeToken.cache_key(digest)
        revision = revision_current()
        cached = cache.get(key)
        if cached is not None and cached[0] == revision:
            token = cached[1]
        else:
            token = (
                RuntimeToken.objects.select_related("application__max_risk", "application__policy")
                .filter(token_hash=digest)
                .first()
            )
            if token is not None:
                cache.set(key, (revision, token), TOKEN_CACHE_SECONDS)
        if token is None or not token.is_usable:
            raise exceptions.AuthenticationFailed("The token is not valid, expired or revoked.")
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            # At most one write a minute per token: reads stay reads.
            RuntimeToken.objects.filter(pk=token.pk).update(last_used_at=now)
            token.last_used_at = now
            cache.set(key, (revision, token), TOKEN_CACHE_SECONDS)
        return Runtime(application=token.application, token=token), token

    def authenticate_header(self, request) -> str:
        return self.keyword


class IsRuntimeOrStaff(permissions.BasePermission):
    """A runtime token, or a staff member's admin session (to browse the API)."""

    def has_permission(self, request, view) -> bool:
        user = request.user
        if isinstance(user, Runtime):
            return True
        if user is None or not getattr(user, "is_authenticated", False):
            raise exceptions.NotAuthenticated()
        return bool(user.is_staff)


class HasScope(permissions.BasePermission):
    """The view's ``required_scope`` must be among the token's scopes (staff sessions read only)."""

    message = "The token lacks the scope this endpoint needs."

    def has_permission(self, request, view) -> bool:
        scope = getattr(view, "required_scope", None)
        user = request.user
        if isinstance(user, Runtime):
            if scope and scope not in user.scopes:
                self.message = f"The token lacks the '{scope}' scope."
                return False
            return True
        return scope != RuntimeToken.Scope.TRACES_WRITE or bool(user and user.is_superuser)
