"""Development mail: every message appended to one file, ``var/mail/outbox.log``."""

import os

from django.core.mail.backends import filebased


class OutboxEmailBackend(filebased.EmailBackend):
    """Django's file backend writes one file per connection (one per message sent with
    ``send_mail``); a person looking for the demo's mail wants one file to read or tail."""

    file_path: str  # set by the file backend from EMAIL_FILE_PATH

    def _get_filename(self) -> str:
        return os.path.join(self.file_path, "outbox.log")
