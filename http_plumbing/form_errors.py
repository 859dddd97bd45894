"""A service's ValidationError shown on the form that was posted (issue 34.4): one loop for every app's views."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError


def add_validation_errors(form: forms.BaseForm, exc: ValidationError) -> None:
    """Each field's messages beside that field; messages for names the form has no field for at the top."""
    for name, msgs in exc.message_dict.items():
        form.add_error(name if name in form.fields else None, msgs)
