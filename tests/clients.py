"""Test clients signed in as a person: a browser session for pages, a forced login for the API."""

from __future__ import annotations

from typing import Any

from django.test import Client
from rest_framework.test import APIClient


def web_client(user: Any) -> Client:
    c = Client()
    c.force_login(user)
    return c


def api_client(user: Any) -> APIClient:
    c = APIClient()
    c.force_authenticate(user)
    return c
