import json
from typing import Any

from django import forms
from django.forms import widgets

from .models import ContractVersion, Tool
from .services import contract_validate
from .validation import ContractInvalid


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


# The document's ``name`` and ``status`` are the form's ``tool_name`` and ``lifecycle``.
FORM_NAMES = {"name": "tool_name", "status": "lifecycle"}


class ContractForm(forms.ModelForm[ContractVersion]):
    """Edits build a contract document; the review service decides what becomes of it."""

    tool_name = forms.CharField(
        max_length=200, help_text="Dotted name, e.g. calendar.find_events.", required=False
    )

    class Meta:
        model = ContractVersion
        fields = [*ContractVersion.CONTRACT_FIELDS, "risk", "lifecycle"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "tool_name" not in self.fields:  # a read-only version's page
            return
        if self.instance.pk:
            self.fields["tool_name"].initial = self.instance.tool.name
            self.fields["tool_name"].disabled = True
        else:
            self.fields["tool_name"].required = True

    def document(self) -> dict[str, Any]:
        data = self.cleaned_data
        document = {"name": data["tool_name"]}
        for field in ContractVersion.CONTRACT_FIELDS:
            document[field] = data.get(field)
        document["risk"] = data["risk"].name if data.get("risk") else None
        document["status"] = data.get("lifecycle") or Tool.Lifecycle.ACTIVE
        return {key: value for key, value in document.items() if value is not None}

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            contract_validate(document=self.document())
        except ContractInvalid as exc:
            for field, reasons in exc.errors.items():
                target = FORM_NAMES.get(field, field)
                self.add_error(target if target in self.fields else None, reasons)
        return cleaned
