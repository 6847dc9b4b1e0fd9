"""The middleware chain, one pure-ASGI class per module (streaming-safe: SSE passes through).

Assembled in ``app.main.create_app``, outermost first: uvicorn's ``ProxyHeadersMiddleware`` (only
with ``TRUST_PROXY_HEADERS``), ``hosts``, ``correlation``, ``security_headers``, ``body_limit``,
``sessions``, ``csrf``.
"""
