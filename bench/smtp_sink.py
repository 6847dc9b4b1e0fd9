"""An SMTP server that accepts every message at once: the mail leg costs nothing but the wire.

``python -m bench.smtp_sink PORT`` runs it in its own process (so its CPU is not the web's or
the worker's). It speaks just enough SMTP for aiosmtplib: EHLO, MAIL, RCPT, DATA, RSET, NOOP,
QUIT; each DATA is read to the final dot and answered 250. It counts messages and prints the
count on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys

RECEIVED = 0


async def _session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    global RECEIVED
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
                await reader.readuntil(b"\r\n.\r\n")
                RECEIVED += 1
                writer.write(b"250 2.0.0 OK\r\n")
            elif verb == b"QUIT":
                writer.write(b"221 bye\r\n")
                await writer.drain()
                break
            else:
                writer.write(b"250 OK\r\n")
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_session, "127.0.0.1", port, backlog=1024)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    print(f"received {RECEIVED}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
