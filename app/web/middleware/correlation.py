"""One correlation id per request, from the caller's ``X-Request-ID`` or new."""

from __future__ import annotations

import re
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import Receive, Scope, Send

from app.logs import correlation_id
from app.web.middleware.response_headers import HttpMiddleware, sending_with_headers

# \Z, not $: "$" also matches before a trailing newline, which would reach a mail header.
_SAFE_REQUEST_ID = re.compile(r"\A[A-Za-z0-9._:-]{1,64}\Z")


class CorrelationIdMiddleware(HttpMiddleware):
    """One correlation id per request: the caller's ``X-Request-ID`` if sane, else a new one.
    It tags every log line and is stored on the invite, so it follows into the job and the mail.
    """

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        incoming = ""
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                incoming = value.decode("latin-1")
        request_id = incoming if _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        token = correlation_id.set(request_id)
        scope["correlation_id"] = request_id  # for the 500 handler, which runs outside us

        def add_id(headers: MutableHeaders) -> None:
            headers["X-Request-ID"] = request_id

        try:
            await self.app(scope, receive, sending_with_headers(send, add_id))
        finally:
            correlation_id.reset(token)
