import os

from django.core.wsgi import get_wsgi_application

from config.chunked import ChunkedBodyMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
django_application = get_wsgi_application()
# Imported once Django is set up. The hot reads are answered in front of Django (api/fast.py);
# everything else, and whatever that path cannot answer, goes to Django as before.
from api.fast import FastReads  # noqa: E402

application = FastReads(ChunkedBodyMiddleware(django_application))
