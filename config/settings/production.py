"""Production: secrets from the environment only, HTTPS everywhere."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import env, env_bool, env_value

SECRET_KEY = env_value("SECRET_KEY", env.str, "")
if len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("SECRET_KEY: set a random value of at least 50 characters")
DEBUG = False
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
# Healthchecks call the process itself over plain HTTP; the answer holds nothing secret.
SECURE_REDIRECT_EXEMPT = [r"^api/v1/health/\Z"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env_value("SECURE_HSTS_SECONDS", env.int, 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Static files (admin, API docs) are served by WhiteNoise from the installed packages, so the
# server works however it is started, with no collectstatic step to forget or to go stale.
WHITENOISE_USE_FINDERS = True
EMAIL_BACKEND = env_value("EMAIL_BACKEND", env.str, "django.core.mail.backends.smtp.EmailBackend")
