"""OpenAPI description of runtime authentication (loaded by drf-spectacular from api.apps)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class RuntimeTokenScheme(OpenApiAuthenticationExtension):
    target_class = "api.auth.RuntimeTokenAuthentication"
    name = "RuntimeToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A runtime token from `manage.py create_runtime_token`.",
        }
