"""Command line: ``python -m app dev | migrate | mailbox``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.config import ConfigError, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description="Convites")
    commands = parser.add_subparsers(dest="command", required=True)
    dev = commands.add_parser("dev", help="run everything for one person on this machine")
    dev.add_argument("--port", type=int, default=8000, help="web port (default 8000)")
    dev.add_argument("--host", default="127.0.0.1")
    commands.add_parser("migrate", help="apply the database migrations")
    mailbox = commands.add_parser("mailbox", help="run the local dev mailbox (an SMTP server)")
    mailbox.add_argument("--dir", type=Path, required=True)
    mailbox.add_argument("--host", default="127.0.0.1")
    mailbox.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    try:
        if args.command == "dev":
            from app.dev import run_dev

            return run_dev(args.host, args.port)
        if args.command == "migrate":
            from app.migrate import upgrade

            upgrade(load_settings())
            print("Migrations applied.")
            return 0
        if args.command == "mailbox":
            from app.mailbox import serve

            serve(args.dir, args.host, args.port)
            return 0
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
