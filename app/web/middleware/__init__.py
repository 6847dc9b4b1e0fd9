"""The middleware chain, one pure-ASGI class per module (streaming-safe: SSE passes through)."""
