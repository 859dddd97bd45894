import pytest


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # Every test signs people in; PBKDF2 at full strength would dominate the run time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
