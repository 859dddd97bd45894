"""Run by test_throwaway.py in a child pytest (not collected on its own: no test_ prefix)."""

import pytest
from django.db import connection


@pytest.mark.postgres
@pytest.mark.django_db
def test_needs_postgres():
    assert connection.vendor == "postgresql"
    with connection.cursor() as c:
        c.execute("SELECT 1")
        assert c.fetchone() == (1,)
