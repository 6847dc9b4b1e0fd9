"""The HTTP API's own state: API keys (``keys``) and Idempotency-Key claims (``idempotency``).
Its endpoints are ``app.web.api``; the pages for the keys, ``app.web.api_keys``."""
