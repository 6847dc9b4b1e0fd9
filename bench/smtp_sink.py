"""An SMTP server that accepts every message at once: the mail leg costs nothing but the wire.

``python -m bench.smtp_sink PORT LINKS`` runs it in its own process (so its CPU is not the
web's or the worker's). It speaks just enough SMTP for aiosmtplib: EHLO, MAIL, RCPT, DATA,
RSET, NOOP, QUIT; each DATA is read to the final dot and answered 250. It counts messages and
prints the count on SIGTERM. A bench sender signs in like a person, by the link in a mail:
messages to ``bench-sender-…`` addresses are read, and their sign-in link is appended to the
file LINKS as ``address<TAB>link`` (every other message is only counted).
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from email import message_from_bytes, policy
from pathlib import Path

RECEIVED = 0
SENDER_PREFIX = b"RCPT TO:<bench-sender-"
_LINK = re.compile(r"https?://\S+/entrar/[A-Za-z0-9_-]+")


def _keep_link(data: bytes, links: Path) -> None:
    message = message_from_bytes(data.removesuffix(b"\r\n.\r\n"), policy=policy.default)
    body = message.get_body(("plain",))
    found = _LINK.search(body.get_content()) if body is not None else None
    if found:
        with links.open("a") as handle:
            handle.write(f"{message['To']}\t{found.group(0)}\n")


async def _session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, links: Path) -> None:
    global RECEIVED
    to_a_sender = False
    writer.write(b"220 bench-sink ESMTP\r\n")
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            verb = line[:4].upper()
            if verb == b"EHLO":
                writer.write(b"250-bench-sink\r\n250-8BITMIME\r\n250 PIPELINING\r\n")
            elif verb == b"DATA":
                writer.write(b"354 go ahead\r\n")
                data = await reader.readuntil(b"\r\n.\r\n")
                RECEIVED += 1
                if to_a_sender:
                    _keep_link(data, links)
                    to_a_sender = False
                writer.write(b"250 2.0.0 OK\r\n")
            elif verb == b"QUIT":
                writer.write(b"221 bye\r\n")
                await writer.drain()
                break
            else:
                to_a_sender = to_a_sender or line.upper().startswith(SENDER_PREFIX.upper())
                writer.write(b"250 OK\r\n")
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(port: int, links: Path) -> None:
    server = await asyncio.start_server(
        lambda reader, writer: _session(reader, writer, links), "127.0.0.1", port, backlog=1024
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    print(f"received {RECEIVED}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), Path(sys.argv[2])))
