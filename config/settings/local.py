"""Development: the embedded default (SQLite, filesystem broker), debug on."""

from .base import *  # noqa: F403
from .base import VAR_DIR, env, env_bool, env_value

DEBUG = env_bool("DEBUG", True)

# Mail (review requests, decisions) is appended to var/mail/outbox.log, not printed to the
# terminal, where it would bury the logins and the token.
EMAIL_BACKEND = env_value("EMAIL_BACKEND", env.str, "config.mail.OutboxEmailBackend")
EMAIL_FILE_PATH = VAR_DIR / "mail"
