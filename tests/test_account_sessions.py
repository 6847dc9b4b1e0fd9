"""Trust boundaries of accounts: an invitation link answers, it never signs in; a person sees
their open sessions on /conta and ends any or all of them; nobody can lock a person out of
signing in. Real app, real worker (burst), real SMTP capture, real Redis."""

from __future__ import annotations

import asyncio
import re
from contextlib import AsyncExitStack
from dataclasses import replace

import httpx
import pytest
from sqlalchemy import select, update

from app.accounts.devices import describe
from app.accounts.store import account_by_email
from app.clock import utcnow
from app.config import Settings
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import sessions
from tests.answering import invited, press
from tests.fixtures import SENDER, drain
from tests.helpers import (
    JSON,
    api_headers,
    client_for,
    csrf_token,
    invite_row,
    page_token,
    statuses,
)
from tests.services import ScriptedSmtp
from tests.signing_in import link_in, sign_in

IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
)
WINDOWS_FIREFOX = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0"


async def ask_for_link(http: httpx.AsyncClient, email: str) -> httpx.Response:
    token = (await http.get("/entrar", headers=JSON)).json()["csrf_token"]
    return await http.post(
        "/entrar", json={"email": email}, headers={**JSON, "X-CSRF-Token": token}
    )


async def press_entrar(http: httpx.AsyncClient, path: str) -> httpx.Response:
    page = await http.get(path)
    return await http.post(path, data={"csrf_token": page_token(page.text)})


async def signed_in_as(http: httpx.AsyncClient) -> str | None:
    """Whose account this browser is in, as the server sees it (``None``: nobody's)."""
    answer = await http.get("/convites", headers=JSON)
    if answer.status_code == 401:
        return None
    conta = await http.get("/conta")
    found = re.search(r"Você entrou como <strong>([^<]+)</strong>", conta.text)
    assert found, conta.text
    return found.group(1)


# --- An invitation link is not a login --------------------------------------------------------


async def test_a_forwarded_link_to_an_existing_account_records_the_answer_and_signs_nobody_in(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    """The report: ``vitima@`` has an account with a private Mensagem; someone invites her;
    whoever holds that mail's link presses Aceitar in a fresh browser. Fails if accepting
    begins a session (``begin_session`` in ``app.web.answers``)."""
    async with client_for(settings, smtp=smtp, email="vitima@exemplo.com") as vitima:
        private = await vitima.post(
            "/convites",
            json={"email": "amiga@exemplo.com", "mensagem": "Segredo da vítima"},
            headers=await api_headers(vitima),
        )
        assert private.status_code == 202
    public_id, path = await invited(client, settings, smtp, email="vitima@exemplo.com")

    async with client_for(settings) as holder:
        answered = await press(holder, path, "aceitar")
        assert answered.status_code == 303 and answered.headers["location"] == path
        page = await holder.get(path)
        mine = await holder.get("/convites", headers=JSON)
        account_page = await holder.get("/conta")

    assert (await invite_row(db, public_id)).status == Status.ACEITO
    assert "Você aceitou o convite de Marta Souza" in page.text
    assert "peça um link de acesso" in page.text and "Segredo" not in page.text
    assert mine.status_code == 401
    assert account_page.status_code == 303 and account_page.headers["location"] == "/entrar"
    async with db.read() as conn:
        opened = (await conn.execute(select(sessions.c.account_id))).scalars().all()
    vitima_account = await account_by_email(db, "vitima@exemplo.com")
    assert vitima_account is not None
    assert opened.count(vitima_account.id) == 1  # her own sign-in, nothing from the link


async def test_accepting_as_a_new_address_creates_no_account_and_no_session(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    _, path = await invited(client, settings, smtp, email="nova@exemplo.com")

    answered = await press(anonymous_client, path, "aceitar")

    assert answered.status_code == 303
    assert await signed_in_as(anonymous_client) is None
    assert await account_by_email(db, "nova@exemplo.com") is None


async def test_the_sender_pressing_the_link_stays_who_they_are(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    _, path = await invited(client, settings, smtp)

    await press(client, path, "aceitar")

    assert await signed_in_as(client) == SENDER


async def test_after_recusar_the_link_cannot_accept(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    """Either answer is final for the link (``ANSWERABLE`` without ``recusado``): someone else
    holding a forwarded link cannot turn the invitee's no into a yes."""
    public_id, path = await invited(client, settings, smtp)
    await press(anonymous_client, path, "recusar")
    page = await anonymous_client.get(path)

    pressed = await anonymous_client.post(  # a page opened before Recusar still has the button
        f"{path}/aceitar", data={"csrf_token": await csrf_token(anonymous_client)}
    )

    assert "Aceitar convite" not in page.text and "envie o convite de novo" in page.text
    assert pressed.status_code == 200 and "Você recusou o convite" in pressed.text
    assert (await invite_row(db, public_id)).status == Status.RECUSADO
    assert [s for s, _ in await statuses(db, public_id)].count("aceito") == 0
    again = await client.post(f"/convites/{public_id}/reenviar", headers=await api_headers(client))
    assert again.status_code == 202  # changing one's mind: the sender invites again


# --- Open sessions on /conta ------------------------------------------------------------------


async def test_conta_lists_each_open_session_with_device_time_and_network(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    async with AsyncExitStack() as stack:
        phone = await stack.enter_async_context(client_for(settings, client=("2001:db8:1:2::7", 1)))
        laptop = await stack.enter_async_context(client_for(settings, client=("203.0.113.5", 1)))
        phone.headers["User-Agent"] = IPHONE
        laptop.headers["User-Agent"] = WINDOWS_FIREFOX
        for http in (phone, laptop):
            await sign_in(http, smtp, "dona@exemplo.com", lambda: drain(settings))

        page = (await laptop.get("/conta")).text

    section = page.split('id="sessoes"', 1)[1]
    items = section.split('class="sessao"')[1:]
    assert len(items) == 2
    laptop_item, phone_item = items  # the most recently used first
    assert "Firefox no Windows" in laptop_item and "(este aparelho)" in laptop_item
    assert "da rede 203.0.113.5" in laptop_item
    assert "Safari no iPhone" in phone_item and "(este aparelho)" not in phone_item
    assert "da rede 2001:db8:1:2::/64" in phone_item and "::7" not in phone_item
    assert "Entrou em <time" in phone_item and "Último uso em <time" in phone_item
    assert section.count(">Encerrar<") == 2 and "Sair de todos os aparelhos" in section


async def test_a_copied_cookie_used_from_another_network_shows_there_at_once(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    """The owner, on another device, sees where their phone's session was last used. Fails if
    a use from a new network waits for ``TOUCH_SECONDS`` (or is never written)."""
    async with client_for(settings, client=("198.51.100.66", 1)) as thief:
        thief.cookies.update(dict(client.cookies))
        assert (await thief.get("/convites", headers=JSON)).status_code == 200

    async with client_for(settings, smtp=smtp, email=SENDER) as laptop:
        page = (await laptop.get("/conta")).text
    phone_item = page.split('class="sessao"')[2]
    assert "(este aparelho)" not in phone_item
    assert re.search(r"Último uso em <time[^>]*>[^<]*</time>, da rede 198\.51\.100\.66", phone_item)


async def test_a_use_is_written_down_when_the_last_one_is_old(
    client: httpx.AsyncClient, db: Database
) -> None:
    long_ago = utcnow().replace(year=2020)
    async with db.write() as conn:
        await conn.execute(update(sessions).values(last_used_at=long_ago))

    await client.get("/convites", headers=JSON)

    async with db.read() as conn:
        [last_used] = (await conn.execute(select(sessions.c.last_used_at))).scalars().all()
    assert last_used > long_ago


def session_ids(page: str) -> list[str]:
    return re.findall(r'action="/conta/sessoes/([A-Za-z0-9_-]+)/encerrar"', page)


async def test_encerrar_ends_that_session_only(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    async with client_for(settings, smtp=smtp, email=SENDER) as other:
        page = (await client.get("/conta")).text
        current, other_id = session_ids(page)[1], session_ids(page)[0]  # newest use first
        assert "(este aparelho)" in page.split(current, 1)[0].rsplit('class="sessao"', 1)[1]

        ended = await client.post(
            f"/conta/sessoes/{other_id}/encerrar", data={"csrf_token": page_token(page)}
        )

        assert ended.status_code == 303 and ended.headers["location"].startswith("/conta?")
        assert (await other.get("/convites", headers=JSON)).status_code == 401
    after = (await client.get(ended.headers["location"])).text
    assert "Sessão encerrada." in after and session_ids(after) == [current]
    assert (await client.get("/convites", headers=JSON)).status_code == 200


async def test_encerrar_this_session_signs_this_browser_out(client: httpx.AsyncClient) -> None:
    page = (await client.get("/conta")).text
    [current] = session_ids(page)

    ended = await client.post(
        f"/conta/sessoes/{current}/encerrar", data={"csrf_token": page_token(page)}
    )

    assert ended.status_code == 303 and ended.headers["location"] == "/entrar?saiu=este"
    assert (await client.get("/convites", headers=JSON)).status_code == 401


async def test_another_accounts_session_cannot_be_ended_404(
    client: httpx.AsyncClient, other_client: object
) -> None:
    """Fails without ``account_id`` in ``sessions.end_one``'s WHERE."""
    [mine] = session_ids((await client.get("/conta")).text)
    async with other_client() as other:  # type: ignore[operator]
        page = (await other.get("/conta")).text
        refused = await other.post(
            f"/conta/sessoes/{mine}/encerrar", data={"csrf_token": page_token(page)}
        )
    assert refused.status_code == 404 and "não foi encontrada" in refused.text
    assert (await client.get("/convites", headers=JSON)).status_code == 200


async def test_ending_a_session_needs_the_csrf_token(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    [mine] = session_ids((await client.get("/conta")).text)
    for path in (f"/conta/sessoes/{mine}/encerrar", "/conta/sessoes/encerrar-todas"):
        assert (await client.post(path, data={})).status_code == 403
    assert (await client.get("/convites", headers=JSON)).status_code == 200


async def test_sair_de_todos_os_aparelhos_ends_every_session_this_one_too(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    async with client_for(settings, smtp=smtp, email=SENDER) as phone:
        copy = dict(client.cookies)
        page = (await client.get("/conta")).text

        out = await client.post(
            "/conta/sessoes/encerrar-todas", data={"csrf_token": page_token(page)}
        )

        assert out.status_code == 303 and out.headers["location"] == "/entrar?saiu=todos"
        assert (await phone.get("/convites", headers=JSON)).status_code == 401
    assert (await client.get("/convites", headers=JSON)).status_code == 401
    async with client_for(settings) as thief:
        thief.cookies.update(copy)
        assert (await thief.get("/convites", headers=JSON)).status_code == 401
    told = await client.get(out.headers["location"])
    assert "Você saiu de todos os aparelhos." in told.text
    async with db.read() as conn:
        live = (await conn.execute(select(sessions).where(sessions.c.revoked_at.is_(None)))).all()
    assert live == []


@pytest.mark.parametrize(
    ("user_agent", "words"),
    [
        (IPHONE, "Safari no iPhone"),
        (WINDOWS_FIREFOX, "Firefox no Windows"),
        (
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/124.0.0.0 Mobile Safari/537.36",
            "Chrome no Android",
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.80",
            "Edge no Windows",
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like "
            "Gecko) Version/17.4 Safari/605.1.15",
            "Safari no Mac",
        ),
        ("curl/8.5.0", "curl"),
        ("", "Aparelho desconhecido"),
        (None, "Aparelho desconhecido"),
    ],
)
def test_the_device_is_named_in_plain_words(user_agent: str | None, words: str) -> None:
    assert describe(user_agent) == words


# --- Nobody can lock a person out of signing in -----------------------------------------------


async def test_requests_from_another_network_do_not_use_up_the_owners_allowance(
    settings: Settings,
) -> None:
    """Fails if the per-address limit counts every network together."""
    limited = replace(settings, signin_links_per_address_per_hour=2)
    async with client_for(limited, client=("198.51.100.7", 1)) as stranger:
        tries = [await ask_for_link(stranger, "dona@exemplo.com") for _ in range(3)]
    async with client_for(limited, client=("2001:db8:5:6::1", 1)) as one:
        first = await ask_for_link(one, "dona@exemplo.com")
    async with client_for(limited, client=("2001:db8:5:6::2", 1)) as same_64:
        second = await ask_for_link(same_64, "dona@exemplo.com")
        third = await ask_for_link(same_64, "dona@exemplo.com")
    async with client_for(limited, client=("203.0.113.9", 1)) as owner:
        mine = await ask_for_link(owner, "dona@exemplo.com")

    assert [answer.status_code for answer in tries] == [202, 202, 429]
    assert "vários links para este e-mail" in tries[-1].json()["erro"]
    assert [first.status_code, second.status_code, third.status_code] == [202, 202, 429]
    assert mine.status_code == 202


async def test_a_newer_link_does_not_kill_the_one_the_owner_is_about_to_use(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    """Fails if issuing a link retires the address's older ones."""
    async with client_for(settings) as owner, client_for(settings) as stranger:
        assert (await ask_for_link(owner, "dona@exemplo.com")).status_code == 202
        await drain(settings)
        owners_link = link_in(smtp, "dona@exemplo.com")
        assert (await ask_for_link(stranger, "dona@exemplo.com")).status_code == 202
        await drain(settings)
        strangers_link = link_in(smtp, "dona@exemplo.com")  # also in dona's inbox

        entered = await press_entrar(owner, owners_link)
        retired = await owner.get(strangers_link)

    assert entered.status_code == 303
    assert retired.status_code == 410 and "os outros links" in retired.text


async def test_of_two_links_of_one_address_pressed_at_once_one_signs_in(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    """Using a link retires the others in the same transaction, under a row lock in id order
    (``FOR UPDATE`` on PostgreSQL): never two sessions from one retirement, never a deadlock."""
    async with client_for(settings) as first, client_for(settings) as second:
        links = []
        for http in (first, second):
            assert (await ask_for_link(http, "corrida@exemplo.com")).status_code == 202
            await drain(settings)
            links.append(link_in(smtp, "corrida@exemplo.com"))
        pages = [await http.get(link) for http, link in zip((first, second), links, strict=True)]
        answers = await asyncio.gather(
            *(
                http.post(link, data={"csrf_token": page_token(page.text)})
                for http, link, page in zip((first, second), links, pages, strict=True)
            )
        )
    assert sorted(answer.status_code for answer in answers) == [303, 410]
