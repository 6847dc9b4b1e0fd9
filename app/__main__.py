"""Command line: ``python -m app dev | worker | pause | resume | migrate | mailbox | bounces |
status | reconcile | retry | suppression | esquecer``."""

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
    commands.add_parser("worker", help="run a worker that rides out Redis outages")
    pause = commands.add_parser("pause", help="pause sending on purpose (workers claim nothing)")
    pause.add_argument("--motivo", default="", help="why (shown on /operacao and in status)")
    commands.add_parser("resume", help="resume sending after a pause")
    commands.add_parser("migrate", help="apply the database migrations")
    mailbox = commands.add_parser("mailbox", help="run the local dev mailbox (an SMTP server)")
    mailbox.add_argument("--dir", type=Path, required=True)
    mailbox.add_argument("--host", default="127.0.0.1")
    mailbox.add_argument("--port", type=int, required=True)
    commands.add_parser("bounces", help="run the bounce receiver (an SMTP server on BOUNCE_LISTEN)")
    status = commands.add_parser("status", help="health summary; exit 0 when healthy, 1 when not")
    status.add_argument("--json", action="store_true", help="the same JSON as GET /saude")
    commands.add_parser("reconcile", help="one reconciliation pass, and what it did")
    retry = commands.add_parser("retry", help="send again every falhou (or incerto) invite")
    retry.add_argument("--status", choices=["falhou", "incerto"], required=True)
    retry.add_argument("--reason", help="only invites whose reason contains this text")
    suppression = commands.add_parser("suppression", help="the suppression list: list, lift")
    suppression_commands = suppression.add_subparsers(dest="action", required=True)
    suppression_commands.add_parser("list", help="every address nobody may invite, and why")
    lift = suppression_commands.add_parser("lift", help="let an address be invited again")
    lift.add_argument("email")
    lift.add_argument("--motivo", required=True, help="why (logged)")
    lift.add_argument("--quem", help="who lifts it (logged; default: this system user)")
    forget = commands.add_parser("esquecer", help="erase an e-mail address everywhere (LGPD)")
    forget.add_argument("email", help="the address to forget")
    args = parser.parse_args(argv)

    try:
        if args.command == "dev":
            from app.dev.run import run_dev

            return run_dev(args.host, args.port)
        if args.command == "worker":
            from app.sending.supervise import run

            return run()
        if args.command == "migrate":
            from app.storage.migrate import upgrade

            upgrade(load_settings())
            print("Migrations applied.")
            return 0
        if args.command == "mailbox":
            from app.dev.mailbox import serve

            serve(args.dir, args.host, args.port)
            return 0
        if args.command == "bounces":
            from app.bounces.command import run_receiver

            return run_receiver(load_settings())
        if args.command in ("pause", "resume"):
            return _pause(args)
        if args.command == "esquecer":
            return _forget(args.email)
        if args.command in ("status", "reconcile", "retry", "suppression"):
            return _oncall(args)
    except ConfigError as exc:
        print(f"Configuration error: {exc}", file=sys.stderr)
        return 2
    return 1


def _pause(args: argparse.Namespace) -> int:
    import asyncio

    from app.sending.pause import pause_sending, resume_sending
    from app.storage.database import Database

    async def run() -> str:
        db = Database(load_settings().database_url)
        try:
            if args.command == "pause":
                pause = await pause_sending(db, "cli", args.motivo)
                return f"Envio pausado desde {pause.since:%Y-%m-%d %H:%M:%S} UTC."
            resumed = await resume_sending(db)
            return "Envio retomado." if resumed else "O envio não estava pausado."
        finally:
            await db.dispose()

    print(asyncio.run(run()))
    return 0


def _forget(email: str) -> int:
    import asyncio

    from app.consent.erasure import NotAnAddress, address_to_forget, forget, report
    from app.storage.database import Database

    try:
        address_to_forget(email)  # refused before the database is opened
    except NotAnAddress as exc:
        print(f"Endereço inválido, nada foi apagado: {exc}", file=sys.stderr)
        return 2

    async def run() -> str:
        db = Database(load_settings().database_url)
        try:
            return report(email.strip(), await forget(db, email))
        finally:
            await db.dispose()

    print(asyncio.run(run()))
    return 0


def _oncall(args: argparse.Namespace) -> int:
    import getpass
    import logging

    from app.invites.status import Status
    from app.logs import configure_logging
    from app.ops import commands as oncall

    # stdout is for the person; JSON warnings and errors go to stderr.
    configure_logging("cli", logging.WARNING)
    settings = load_settings()
    if args.command == "status":
        return oncall.status(settings, as_json=args.json)
    if args.command == "reconcile":
        return oncall.reconcile_once(settings)
    if args.command == "suppression":
        if args.action == "list":
            return oncall.suppression_list(settings)
        who = args.quem or getpass.getuser()
        return oncall.suppression_lift(settings, args.email, who, args.motivo)
    return oncall.retry(settings, Status(args.status), args.reason)


if __name__ == "__main__":
    sys.exit(main())
