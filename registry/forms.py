import json

from django import forms
from django.forms import widgets


class JSONTextarea(widgets.Textarea):
    def __init__(self, attrs=None):
        super().__init__(
            {"rows": 10, "cols": 90, "style": "font-family: monospace", "spellcheck": "false"}
            | (attrs or {})
        )


class PrettyJSONField(forms.JSONField):
    """Shows JSON indented, so people can read and edit a schema in the admin."""

    widget = JSONTextarea

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
