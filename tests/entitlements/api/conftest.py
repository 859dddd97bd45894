from tests.api_people import client_for, people  # noqa: F401 - the API tests' people and clients
