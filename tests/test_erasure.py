"""Erasure: ``python -m app esquecer EMAIL`` (a real child process) forgets an address as
invitee, as account (sessions, sign-in links, what it sent), in bounces and in other invites'
texts; on SQLite the address's bytes are then in no file (the database, its WAL, its shm), on
PostgreSQL in no row."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.engine import make_url

from app.config import Settings
from app.consent import suppression
from app.consent.erasure import ERASED, _standing_alone
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import bounces, idempotency_keys, sessions, webhook_deliveries
from tests.api_keys import bearer, new_key
from tests.fixtures import BACKEND, app_client, drain
from tests.helpers import (
    JSON,
    api_headers,
    app_command,
    bounce_sample,
    invite_row,
    post_invite,
    rows_naming,
    send_bounce,
    verp_address,
)
from tests.services import ScriptedSmtp

ANA = "ana@exemplo.com"


async def forget(settings: Settings, email: str) -> subprocess.CompletedProcess[str]:
    return await app_command(settings, "esquecer", email)


async def bounce_count(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(bounces))).scalar_one())


def database_files(settings: Settings) -> list[Path]:
    path = Path(make_url(settings.database_url).database or "")
    return [p for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists()]


async def test_esquecer_erases_an_address_everywhere_and_says_what_it_removed(
    client: httpx.AsyncClient,
    other_client: Any,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    bounce_port: int,
) -> None:
    to_ana = await post_invite(client, ANA, "Ana")
    mine = {"url": "http://127.0.0.1:9/convites"}  # its deliveries' rows are what matters
    made = await client.post("/api/v1/webhooks", json=mine, headers=bearer(await new_key(client)))
    assert made.status_code == 201, made.text
    kept = await client.post(
        "/convites",
        json={
            "email": "bia@exemplo.com",
            "nome": f"Bia (amiga de {ANA})",
            "mensagem": f"Traga a {ANA} também.",
            "ocasiao": f"Aniversário de {ANA}",
            "ocasiao_local": f"Casa de {ANA.upper()}",
        },
        headers=await api_headers(client),
    )
    assert kept.status_code == 202, kept.text
    bia = await invite_row(db, kept.json()["id"])
    async with other_client() as other:  # through the API, with its answer kept
        headers = bearer(await new_key(other), **{"Idempotency-Key": "pedido-1"})
        sent = await other.post("/api/v1/convites", json={"email": ANA}, headers=headers)
        assert sent.status_code == 202, sent.text
    await drain(settings)  # the invitations arrive before ana asks for her sign-in link
    async with app_client(settings, smtp, ANA) as ana:
        secret = await new_key(ana)
        hook = {"url": "http://127.0.0.1:9/convites"}  # its deliveries' rows are what matters
        made = await ana.post("/api/v1/webhooks", json=hook, headers=bearer(secret, **JSON))
        assert made.status_code == 201, made.text
        ana_key = bearer(secret, **{"Idempotency-Key": "pedido-2"})
        sent = await ana.post(
            "/api/v1/convites", json={"email": "caio@exemplo.com"}, headers=ana_key
        )
        assert sent.status_code == 202, sent.text  # what ana's account sent
        await drain(settings)
        async with db.write() as conn:  # a receiver whose reply echoes what it was sent
            await conn.execute(
                update(webhook_deliveries)
                .where(webhook_deliveries.c.invite_id == bia.id)
                .values(snippet=f'{{"ok": true, "recebido": "{ANA}"}}')
            )
        invite = await invite_row(db, to_ana["id"])
        raw = bounce_sample("gmail.eml", invite, settings)
        await send_bounce(bounce_port, raw, verp_address(settings, invite.public_id))
        assert (await invite_row(db, to_ana["id"])).status == Status.DEVOLVIDO
        assert sum((await rows_naming(db, ANA)).values()) > 0

        done = await forget(settings, "Ana@Exemplo.com")

        assert done.returncode == 0, done.stderr
        assert (await ana.get("/")).text.count("Entrar") > 0  # the session went with the account
    printed = done.stdout.splitlines()
    assert printed[0] == "Apagado tudo o que havia de Ana@Exemplo.com:"
    labels = [line.rsplit(": ", 1)[0] for line in printed[1:]]
    assert labels == sorted(labels)  # by what a person reads
    assert "  contas: 1" in printed and "  sessões (aparelhos): 1" in printed
    assert "  devoluções: 1" in printed and "  links de acesso: 1" in printed
    # ana's invitations (2), her sign-in mail (1), and the invite her account sent (1)
    assert "  convites e e-mails de acesso: 4" in printed
    assert "  mensagens de outros convites (endereço substituído): 1" in printed
    assert "  nomes em outros convites (endereço substituído): 1" in printed
    assert "  ocasiões de outros convites (endereço substituído): 1" in printed
    assert "  locais de ocasião de outros convites (endereço substituído): 1" in printed
    assert any(
        line.startswith("  respostas de receptores de webhook de outras contas") for line in printed
    )
    assert "  chaves de API: 1" in printed and "  webhooks: 1" in printed
    assert any(line.startswith("  entregas de webhook: ") for line in printed)
    assert "  entradas na lista de supressão: 1" in printed  # the 5.1.1 bounce put it there
    assert "  respostas guardadas da API (Idempotency-Key): 1" in printed
    assert "  respostas guardadas de outros clientes da API (endereço substituído): 1" in printed
    assert await rows_naming(db, ANA) == dict.fromkeys(
        [
            "invites",
            "invite_events",
            "accounts",
            "signin_tokens",
            "bounces",
            "idempotency_keys",
            "webhook_deliveries",
            "bounces.raw",
        ],
        0,
    )
    bia = await invite_row(db, kept.json()["id"])
    assert bia.message == "Traga a [endereço apagado] também."
    assert bia.name == "Bia (amiga de [endereço apagado])"
    assert (bia.occasion_title, bia.occasion_place) == (
        "Aniversário de [endereço apagado]",
        "Casa de [endereço apagado]",  # found in another letter case; the rest as written
    )
    async with db.read() as conn:
        assert (await conn.execute(select(func.count()).select_from(sessions))).scalar() >= 1
    if BACKEND == "sqlite":
        files = database_files(settings)
        assert files and all(ANA.encode() not in f.read_bytes().lower() for f in files)


async def test_every_sqlite_connection_overwrites_deleted_rows(db: Database) -> None:
    # Debian's SQLite defaults to secure_delete=1 (compile option), so this only fails on a
    # build that defaults to 0 if the pragma in app/storage/database.py goes.
    if not db.is_sqlite:
        return
    for engine in (db.writer, db.reader):
        async with engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA secure_delete")).scalar() == 1


async def test_an_opt_out_is_kept_as_its_hash_alone(settings: Settings, db: Database) -> None:
    await suppression.suppress(db, ANA, suppression.Reason.OPTED_OUT)

    done = await forget(settings, ANA)

    assert done.stdout.splitlines()[1:] == [
        "  descadastro mantido só como hash (sem o endereço): 1"
    ]
    entry = await suppression.entry_for(db, ANA)
    assert entry is not None and entry.email is None
    assert await suppression.reason_for(db, ANA) == suppression.Reason.OPTED_OUT
    if BACKEND == "sqlite":
        assert all(ANA.encode() not in f.read_bytes() for f in database_files(settings))


async def test_an_address_inside_another_is_left_alone(
    client: httpx.AsyncClient, settings: Settings, db: Database, bounce_port: int
) -> None:
    """Erasing ana@exemplo.com touches neither diana@exemplo.com nor ana@exemplo.com.br: not
    their invites, not their bounces, not where a text names them; where a text names ana
    herself (a full stop after the address still ends it), only her address is replaced."""
    others = ("diana@exemplo.com", "ana@exemplo.com.br")
    made = [
        await post_invite(client, email, f"Amiga de {ANA.upper()}. E {email}") for email in others
    ]
    await drain(settings)
    diana = await invite_row(db, made[0]["id"])
    raw = bounce_sample("gmail.eml", diana, settings)
    await send_bounce(bounce_port, raw, verp_address(settings, diana.public_id))
    assert await bounce_count(db) == 1

    done = await forget(settings, ANA)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"Apagado tudo o que havia de {ANA}:",
        "  nomes em outros convites (endereço substituído): 2",
    ]
    for created, email in zip(made, others, strict=True):
        row = await invite_row(db, created["id"])
        assert (row.email, row.name) == (email, f"Amiga de {ERASED}. E {email}")
    assert await bounce_count(db) == 1


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"mensagem_pessoal":"Oi!\\nana@exemplo.com"}', True),  # JSON's escaped line break
        ("o e-mail 'ana@exemplo.com' voltou", True),
        ("/c?email=ana@exemplo.com", True),
        ("=?utf-8?Q?=3Cana@exemplo.com=3E?=", True),  # quoted-printable
        ("Fale com ANA@Exemplo.com.", True),
        ("<ana@exemplo.com>, bia@exemplo.com", True),
        ("diana@exemplo.com", False),
        ("x.ana@exemplo.com", False),
        ("ana@exemplo.com.br", False),
    ],
)
def test_an_address_is_named_where_it_stands_alone(text: str, named: bool) -> None:
    assert bool(_standing_alone(ANA).search(text)) is named


async def test_both_spellings_of_an_international_address_are_erased(
    client: httpx.AsyncClient, other_client: Any, settings: Settings, db: Database
) -> None:
    """The API's kept answer holds the address as stored (``email``) and as people read it (in
    ``mensagem``): neither is left."""
    async with other_client() as other:
        headers = bearer(await new_key(other), **{"Idempotency-Key": "pedido-idn"})
        body = {"email": "ana@açaí.com.br"}
        sent = await other.post("/api/v1/convites", json=body, headers=headers)
        assert sent.status_code == 202, sent.text
        assert sent.json()["mensagem"].endswith("(convite para ana@açaí.com.br)")

    done = await forget(settings, "ana@açaí.com.br")

    assert done.returncode == 0, done.stderr
    async with db.read() as conn:
        [body] = (await conn.execute(select(idempotency_keys.c.body))).scalars()
    assert "açaí" not in body and "xn--" not in body and ERASED in body


async def test_an_address_nobody_kept_is_reported_as_nothing(settings: Settings) -> None:
    done = await forget(settings, "ninguem@exemplo.com")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Nada encontrado para ninguem@exemplo.com: nenhum dado a apagar.\n"


async def test_a_stray_space_erases_what_the_clean_address_does(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    await post_invite(client, ANA, "Ana")
    # A 5.1.1 bounce put her on the list; an erasure drops such an entry (only an opt-out
    # stays, as its hash): the spaced address must do that and erase her invite too.
    await suppression.suppress(db, ANA, suppression.Reason.BOUNCED)

    done = await forget(settings, f" {ANA} ")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"Apagado tudo o que havia de {ANA}:",
        "  convites e e-mails de acesso: 1",
        "  entradas na lista de supressão: 1",
        "  envios na fila (outbox): 1",
        "  eventos: 1",
    ]
    assert (await rows_naming(db, ANA))["invites"] == 0


async def test_a_unicode_domain_finds_the_invites_stored_with_its_idna_form(
    client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    created = await post_invite(client, "ana@ação.com.br")
    stored = (await invite_row(db, created["id"])).email
    assert stored == "ana@xn--ao-siap.com.br"

    done = await forget(settings, "ana@AÇÃO.com.br")

    assert done.returncode == 0, done.stderr
    assert "  convites e e-mails de acesso: 1" in done.stdout.splitlines()
    assert (await rows_naming(db, stored))["invites"] == 0


async def test_something_that_is_no_address_is_refused_and_nothing_is_touched(
    client: httpx.AsyncClient,
    settings: Settings,
    db: Database,
    bounce_port: int,
) -> None:
    created = await post_invite(client, "bia@exemplo.con")
    await drain(settings)
    invite = await invite_row(db, created["id"])
    raw = bounce_sample("gmail.eml", invite, settings)
    await send_bounce(bounce_port, raw, verp_address(settings, invite.public_id))
    assert await bounce_count(db) == 1

    # An empty address is contained in every text: it would match every bounce.
    blank = await forget(settings, "  ")
    broken = await forget(settings, "ana@")

    for refused in (blank, broken):
        assert refused.returncode == 2
        assert refused.stdout == ""
        assert refused.stderr.startswith("Endereço inválido, nada foi apagado: ")
    assert "Informe o e-mail a apagar." in blank.stderr
    assert "Este e-mail não parece válido." in broken.stderr
    assert await bounce_count(db) == 1
    assert (await invite_row(db, created["id"])).status == Status.DEVOLVIDO
