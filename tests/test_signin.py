"""Senders are accounts, signed in by a single-use link sent through the real pipeline."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update

from app.accounts.store import account_by_email
from app.clock import utcnow
from app.config import Settings
from app.invites.records import SIGNIN_MAIL, Invite
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import invites, signin_tokens
from tests.fixtures import SENDER, app_client, drain, process_env
from tests.helpers import (
    JSON,
    api_headers,
    client_for,
    invite_count,
    invite_row,
    page_token,
    post_invite,
)
from tests.services import AppProcess, ScriptedSmtp
from tests.signing_in import link_in, sign_in
from tests.waiting import eventually


async def ask_for_link(http: httpx.AsyncClient, email: str) -> httpx.Response:
    token = (await http.get("/entrar", headers=JSON)).json()["csrf_token"]
    return await http.post(
        "/entrar", json={"email": email}, headers={**JSON, "X-CSRF-Token": token}
    )


async def link_for(
    http: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, email: str
) -> str:
    """Ask for a link and read it in the mail the worker sent."""
    assert (await ask_for_link(http, email)).status_code == 202
    await drain(settings)
    return link_in(smtp, email)


async def press_entrar(http: httpx.AsyncClient, path: str) -> httpx.Response:
    page = await http.get(path)
    assert page.status_code == 200, page.text
    return await http.post(path, data={"csrf_token": page_token(page.text)})


async def test_the_link_arrives_by_mail_and_signing_in_asks_for_a_name_once(
    anonymous_client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    http = anonymous_client
    asked = await ask_for_link(http, "Nova.Pessoa@Exemplo.com")
    assert asked.status_code == 202
    assert asked.json()["status"] == "pendente"
    await drain(settings)
    [mail] = smtp.received
    assert mail.message["Subject"] == "Seu link de acesso ao Convites"
    path = link_in(smtp, "Nova.Pessoa@exemplo.com")
    assert len(path.removeprefix("/entrar/")) >= 43  # 256 random bits, URL-safe

    entered = await press_entrar(http, path)
    assert entered.status_code == 303 and entered.headers["location"] == "/conta?primeira=1"
    form = await http.get("/conta")
    assert "Seu nome" in form.text and "nova.pessoa@exemplo.com" in form.text
    named = await http.post("/conta", data={"csrf_token": page_token(form.text), "nome": "Nova"})
    assert named.status_code == 303 and named.headers["location"] == "/"

    home = await http.get("/")
    assert "Enviar um convite" in home.text and "Nova" in home.text
    account = await account_by_email(db, "NOVA.PESSOA@exemplo.com")
    assert account is not None and account.name == "Nova"
    assert account.email == "nova.pessoa@exemplo.com"  # one account per address, any case


async def test_only_the_hash_of_a_link_is_stored(
    anonymous_client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    path = await link_for(anonymous_client, settings, smtp, "hash@exemplo.com")
    token = path.removeprefix("/entrar/")
    async with db.read() as conn:
        stored = (await conn.execute(select(signin_tokens.c.token_hash))).scalars().all()
    assert len(stored) == 1 and token not in stored[0] and len(stored[0]) == 64


async def test_a_signin_mail_never_appears_in_meus_convites(
    client: httpx.AsyncClient, db: Database
) -> None:
    listed = (await client.get("/convites", headers=JSON)).json()
    assert listed["convites"] == []
    async with db.read() as conn:
        kinds = (await conn.execute(select(invites.c.kind))).scalars().all()
    assert kinds == [SIGNIN_MAIL]


async def test_the_cookie_from_before_signing_in_is_never_signed_in(
    anonymous_client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    http = anonymous_client
    await http.get("/entrar")
    before = dict(http.cookies)
    await sign_in(http, smtp, "fixada@exemplo.com", lambda: drain(settings))
    assert dict(http.cookies) != before

    async with app_client(settings) as planted:  # someone who kept the cookie from before
        planted.cookies.update(before)
        refused = await planted.get("/convites", headers=JSON)
    assert refused.status_code == 401


async def test_a_form_token_from_before_signing_in_is_refused_after_it(
    anonymous_client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    """Whoever planted the cookie knows its token: signing in must make that token worthless."""
    http = anonymous_client
    planted = page_token((await http.get("/entrar")).text)
    await sign_in(http, smtp, "plantada@exemplo.com", lambda: drain(settings))

    forged = await http.post("/convites", data={"email": "alvo@exemplo.com", "csrf_token": planted})
    assert forged.status_code == 403
    assert await invite_count(db) == 0


async def test_after_sair_a_copy_of_the_cookie_is_refused(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    copy = dict(client.cookies)
    assert (await client.get("/convites", headers=JSON)).status_code == 200

    out = await client.post("/sair", headers=await api_headers(client))
    assert out.status_code == 200

    async with app_client(settings) as thief:
        thief.cookies.update(copy)
        refused = await thief.get("/convites", headers=JSON)
    assert refused.status_code == 401
    assert (await client.get("/convites", headers=JSON)).status_code == 401


async def test_a_link_works_once(
    anonymous_client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    path = await link_for(anonymous_client, settings, smtp, "uma-vez@exemplo.com")
    assert (await press_entrar(anonymous_client, path)).status_code == 303

    async with app_client(settings) as other:
        again = await other.get(path)
        spent = await other.post(path, data={"csrf_token": page_token(again.text)})
    assert again.status_code == 410 and "não vale mais" in again.text
    assert spent.status_code == 410 and "Peça um novo link" in spent.text
    assert "Traceback" not in spent.text


async def test_opening_a_link_spends_nothing_only_pressing_entrar_does(
    anonymous_client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    path = await link_for(anonymous_client, settings, smtp, "scanner@exemplo.com")
    async with app_client(settings) as scanner:  # a mail scanner prefetches the link
        assert (await scanner.get(path)).status_code == 200
        assert (await scanner.get(path)).status_code == 200

    assert (await press_entrar(anonymous_client, path)).status_code == 303


async def test_an_expired_link_says_so_with_410(
    settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    async with client_for(settings) as http:
        path = await link_for(http, settings, smtp, "tarde@exemplo.com")
        async with db.write() as conn:
            await conn.execute(update(signin_tokens).values(expires_at=utcnow()))
        page = await http.get(path)
        pressed = await http.post(path, data={"csrf_token": page_token(page.text)})
    assert page.status_code == 410 and "expirou" in page.text
    assert pressed.status_code == 410
    assert "tarde@exemplo.com" in page.text  # the new-link form is filled in


async def test_an_unknown_link_is_404_with_a_new_link_form(
    anonymous_client: httpx.AsyncClient,
) -> None:
    page = await anonymous_client.get("/entrar/" + "x" * 43)
    assert page.status_code == 404 and "Enviar link de acesso" in page.text


async def test_a_newer_link_leaves_the_older_one_working_until_one_is_used(
    anonymous_client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    first = await link_for(anonymous_client, settings, smtp, "duas@exemplo.com")
    second = await link_for(anonymous_client, settings, smtp, "duas@exemplo.com")

    assert first != second
    assert (await anonymous_client.get(first)).status_code == 200
    assert (await press_entrar(anonymous_client, first)).status_code == 303
    retired = await anonymous_client.get(second)
    assert retired.status_code == 410 and "os outros links" in retired.text


async def test_of_two_clicks_on_one_link_only_one_signs_in(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    async with client_for(settings) as first, client_for(settings) as second:
        path = await link_for(first, settings, smtp, "corrida@exemplo.com")
        pages = [await first.get(path), await second.get(path)]
        answers = await asyncio.gather(
            *(
                http.post(path, data={"csrf_token": page_token(page.text)})
                for http, page in zip((first, second), pages, strict=True)
            )
        )
    assert sorted(answer.status_code for answer in answers) == [303, 410]


async def test_a_signin_mail_that_fails_says_why_and_offers_another(
    anonymous_client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.always("550 5.1.1 No such user")
    token = page_token((await anonymous_client.get("/entrar")).text)
    asked = await anonymous_client.post(
        "/entrar", data={"email": "ninguem@exemplo.com", "csrf_token": token}
    )
    assert asked.status_code == 303
    await drain(settings)

    status = await anonymous_client.get(asked.headers["location"])
    assert "Não foi possível enviar o link de acesso para ninguem@exemplo.com" in status.text
    assert "550" in status.text and "Enviar outro link" in status.text


async def test_someone_elses_signin_request_is_404(
    anonymous_client: httpx.AsyncClient, settings: Settings
) -> None:
    token = page_token((await anonymous_client.get("/entrar")).text)
    asked = await anonymous_client.post(
        "/entrar", data={"email": "meu@exemplo.com", "csrf_token": token}
    )
    async with app_client(settings) as stranger:
        seen = await stranger.get(asked.headers["location"])
    assert seen.status_code == 404


async def test_a_bad_address_gets_a_pt_br_message_and_no_row(
    anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    refused = await ask_for_link(anonymous_client, "não é e-mail")
    assert refused.status_code == 422
    assert "não parece válido" in refused.json()["campos"]["email"]
    async with db.read() as conn:
        assert (await conn.execute(select(invites.c.id))).first() is None


async def test_signed_out_the_home_page_explains_and_offers_the_signin_form(
    anonymous_client: httpx.AsyncClient,
) -> None:
    home = await anonymous_client.get("/")
    assert home.status_code == 200
    assert "acompanha, de verdade" in home.text and "Enviar link de acesso" in home.text
    assert "Meus convites" not in home.text


async def test_the_fresh_cookie_script_sends_nothing(
    anonymous_client: httpx.AsyncClient, settings: Settings, db: Database
) -> None:
    """GET / for a token, POST invites, start again with a new cookie: every time refused."""
    codes = []
    for round_ in range(3):
        async with app_client(settings) as script:
            token = page_token((await script.get("/")).text)
            for n in range(5):
                response = await script.post(
                    "/convites",
                    data={"email": f"vitima{round_}{n}@exemplo.com", "csrf_token": token},
                )
                codes.append(response.status_code)
            json = await script.post(
                "/convites",
                json={"email": "vitima@exemplo.com"},
                headers={**JSON, "X-CSRF-Token": token},
            )
            codes.append(json.status_code)
    assert set(codes) == {303, 401}
    assert await invite_count(db) == 0


async def test_an_anonymous_form_post_is_sent_to_sign_in(
    anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    token = page_token((await anonymous_client.get("/")).text)
    response = await anonymous_client.post(
        "/convites", data={"email": "x@exemplo.com", "csrf_token": token}
    )
    assert response.status_code == 303 and response.headers["location"] == "/entrar"
    assert await invite_count(db) == 0


async def test_a_second_browser_of_the_same_account_sees_the_same_list(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    created = await post_invite(client, "lista@exemplo.com")
    async with app_client(settings, smtp, SENDER) as laptop:
        listed = (await laptop.get("/convites", headers=JSON)).json()["convites"]
        mine = await laptop.get(f"/convites/{created['id']}", headers=JSON)
    assert [invite["id"] for invite in listed] == [created["id"]]
    assert mine.status_code == 200


async def test_the_invitation_names_its_sender_and_replies_reach_them(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    await post_invite(client, "convidada@exemplo.com")
    await drain(settings)
    [mail] = smtp.received
    text = mail.message.get_body(("plain",)).get_content()
    assert f"Marta Souza ({SENDER}) convidou você" in text
    assert mail.message["Reply-To"].addresses[0].addr_spec == SENDER


async def test_inviting_an_address_again_while_the_first_is_on_its_way_is_409(
    client: httpx.AsyncClient, db: Database
) -> None:
    first = await post_invite(client, "dupla@exemplo.com")
    again = await client.post(
        "/convites", json={"email": "dupla@EXEMPLO.com"}, headers=await api_headers(client)
    )
    assert again.status_code == 409
    assert again.json()["convite"] == f"/convites/{first['id']}"
    assert "já convidou" in again.json()["erro"]
    assert await invite_count(db) == 1


async def test_a_failed_invite_may_be_sent_to_the_same_address_again(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    smtp.always("550 5.1.1 No such user")
    await post_invite(client, "errei@exemplo.com")
    await drain(settings)
    again = await client.post(
        "/convites", json={"email": "errei@exemplo.com"}, headers=await api_headers(client)
    )
    assert again.status_code == 202


async def test_one_address_gets_at_most_so_many_invites_a_day_from_everyone(
    settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    limited = replace(settings, invites_per_recipient_per_day=2)
    codes = []
    for n in range(3):
        async with client_for(limited, smtp=smtp, email=f"remetente{n}@exemplo.com") as http:
            response = await http.post(
                "/convites", json={"email": "popular@exemplo.com"}, headers=await api_headers(http)
            )
            codes.append(response.status_code)
    assert codes == [202, 202, 429]
    assert "Este endereço já recebeu 2 convites hoje" in response.json()["erro"]
    assert await invite_count(db) == 2


async def test_signin_links_are_limited_per_address(settings: Settings, db: Database) -> None:
    limited = replace(settings, signin_links_per_address_per_hour=2)
    async with client_for(limited) as http:
        codes = [(await ask_for_link(http, "muitos@exemplo.com")).status_code for _ in range(3)]
        other = await ask_for_link(http, "outro@exemplo.com")
    assert codes == [202, 202, 429] and other.status_code == 202


@pytest.mark.parametrize(
    ("first", "second", "shared"),
    [
        ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", True),
        ("2001:db8:1:2::1", "2001:db8:1:3::1", False),
        ("203.0.113.7", "203.0.113.8", False),
    ],
)
async def test_signin_links_are_limited_per_client_network_ipv6_by_64(
    settings: Settings, first: str, second: str, shared: bool
) -> None:
    limited = replace(settings, signin_links_per_client_per_hour=1)
    codes = []
    for n, address in enumerate((first, second)):
        async with client_for(limited, client=(address, 1)) as http:
            codes.append((await ask_for_link(http, f"rede{n}@exemplo.com")).status_code)
    assert codes == ([202, 429] if shared else [202, 202])


async def test_past_the_hourly_budget_sends_wait_as_pendente_and_saude_says_so(
    settings: Settings, smtp: ScriptedSmtp, db: Database, tmp_path: Path
) -> None:
    limited = replace(settings, sends_per_hour=2)  # the sign-in link, then one invite
    async with client_for(limited, smtp=smtp) as http:
        ids = [(await post_invite(http, f"{who}@exemplo.com"))["id"] for who in ("a", "b")]
        env = process_env(settings, SENDS_PER_HOUR="2")
        with AppProcess.worker(env, tmp_path / "worker.log"):
            # The worker runs both jobs at once: either may take the last send of the hour.
            rows: list[Invite] = []
            deferred: list[Invite] = []

            async def one_sent_one_deferred() -> bool:
                nonlocal rows, deferred
                rows = [await invite_row(db, public_id) for public_id in ids]
                deferred = [row for row in rows if "por hora" in (row.error or "")]
                statuses = sorted(row.status for row in rows)
                return statuses == [Status.ENVIADO, Status.PENDENTE] and bool(deferred)

            await eventually(one_sent_one_deferred, what=lambda: f"one sent, one deferred: {rows}")
            health = await http.get("/saude")

    [sent] = [row for row in rows if row.status == Status.ENVIADO]
    [waiting] = deferred
    assert waiting.status == Status.PENDENTE
    assert waiting.next_attempt_at is not None and waiting.next_attempt_at > utcnow()
    assert [mail.rcpt_tos for mail in smtp.received] == [[sent.email]]
    assert health.status_code == 503
    assert [p["codigo"] for p in health.json()["problemas"]] == ["sends_throttled"]


async def test_a_double_click_writes_one_invite_and_answers_409_to_the_other(
    client: httpx.AsyncClient, db: Database
) -> None:
    headers = await api_headers(client)
    answers = await asyncio.gather(
        *(
            client.post("/convites", json={"email": "clique@exemplo.com"}, headers=headers)
            for _ in range(2)
        )
    )
    assert sorted(answer.status_code for answer in answers) == [202, 409]
    assert await invite_count(db) == 1
