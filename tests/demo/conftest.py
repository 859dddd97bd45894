import pytest


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # The demo creates six users; PBKDF2 at full strength would dominate these tests' run time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
