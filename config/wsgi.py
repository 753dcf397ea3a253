import os

from django.core.wsgi import get_wsgi_application

from config.chunked import ChunkedBodyMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
application = ChunkedBodyMiddleware(get_wsgi_application())
