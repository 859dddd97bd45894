"""A real OpenID Connect provider for the OIDC sign-in tests: django-oauth-toolkit in its own process
(gunicorn) with its own SQLite database, an RSA key the test generates, and claims the test controls.

The test writes OIDC_PROVIDER_CLAIMS (a JSON file: username → claims) and may change it between
sign-ins; the provider reads it at every ID token and userinfo answer. `server.ProviderServer` starts it.
"""
