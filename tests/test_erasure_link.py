"""**Apagar meus dados** on the invitation's page and on the opt-out page: the confirmation
link goes to the invite's address through the real worker and SMTP server; opening it erases
nothing; confirming (a form post with the CSRF token) erases as ``python -m app esquecer``
does. One test per guard: a link we did not sign, an expired link, a used link, no CSRF
token."""

from __future__ import annotations

import re

import httpx

from app.config import Settings
from app.consent import suppression
from app.consent.confirmation import LINK_TTL_SECONDS
from app.consent.optout import optout_path
from app.storage.database import Database
from tests.answering import invited, press
from tests.fixtures import MovableClock, drain
from tests.helpers import page_token, rows_naming
from tests.services import ScriptedSmtp

ANA = "ana@exemplo.com"
CONFIRM_LINK = re.compile(r"/apagar/[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


async def asked(
    client: httpx.AsyncClient,
    invitee: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> str:
    """An invitation to ANA, **Apagar meus dados** pressed on its page: the mailed link."""
    _, link = await invited(client, settings, smtp, ANA)
    page = await invitee.get(link)
    assert '<button type="submit" class="secundario">Apagar meus dados</button>' in page.text
    answer = await press(invitee, link, "apagar")
    assert answer.status_code == 202, answer.text
    assert "Confira seu e-mail" in answer.text and ANA in answer.text
    await drain(settings)
    mail = [m for m in smtp.received if ANA in m.rcpt_tos][-1].message
    assert mail["Subject"] == "Confirme: apagar seus dados do Convites"
    text = mail.get_body(("plain",))
    assert text is not None
    found = CONFIRM_LINK.search(text.get_content())
    assert found, text.get_content()
    return found.group(0)


def still_there(rows: dict[str, int]) -> bool:
    return rows["invites"] > 0


async def test_confirming_the_mailed_link_erases_the_address_and_says_so(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    confirm = await asked(client, anonymous_client, settings, smtp)

    page = await anonymous_client.get(confirm)  # a mail scanner's prefetch erases nothing
    assert page.status_code == 200
    assert f"Apagar os dados de {ANA}?" in page.text
    assert still_there(await rows_naming(db, ANA))

    done = await anonymous_client.post(confirm, data={"csrf_token": page_token(page.text)})

    assert done.status_code == 200
    assert "Seus dados foram apagados" in done.text
    assert sum((await rows_naming(db, ANA)).values()) == 0
    again = await anonymous_client.get(confirm)
    assert again.status_code == 410 and "Este link já foi usado" in again.text


async def test_a_link_we_did_not_sign_is_a_404_and_erases_nothing(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    confirm = await asked(client, anonymous_client, settings, smtp)
    forged = confirm[:-4] + ("AAAA" if not confirm.endswith("AAAA") else "BBBB")
    token = page_token((await anonymous_client.get("/entrar")).text)

    assert (await anonymous_client.get(forged)).status_code == 404
    posted = await anonymous_client.post(forged, data={"csrf_token": token})

    assert posted.status_code == 404 and "Este link não é válido" in posted.text
    assert still_there(await rows_naming(db, ANA))


async def test_a_link_whose_tag_is_not_ascii_is_a_404_not_an_error(
    anonymous_client: httpx.AsyncClient,
) -> None:
    # hmac.compare_digest refuses a str holding non-ASCII characters: app.signing compares bytes.
    opened = await anonymous_client.get("/apagar/AbCdEfGh12345678.%C3%A9t%C3%A9")

    assert opened.status_code == 404 and "Este link não é válido" in opened.text


async def test_an_expired_link_is_a_410_and_erases_nothing(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
    clock: MovableClock,
) -> None:
    confirm = await asked(client, anonymous_client, settings, smtp)
    token = page_token((await anonymous_client.get(confirm)).text)
    clock.advance(LINK_TTL_SECONDS + 1)

    posted = await anonymous_client.post(confirm, data={"csrf_token": token})

    assert posted.status_code == 410 and "Este link expirou" in posted.text
    assert (await anonymous_client.get(confirm)).status_code == 410
    assert still_there(await rows_naming(db, ANA))


async def test_confirming_without_the_csrf_token_erases_nothing(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    confirm = await asked(client, anonymous_client, settings, smtp)

    posted = await anonymous_client.post(confirm, data={})

    assert posted.status_code == 403
    assert still_there(await rows_naming(db, ANA))


async def test_an_address_that_opted_out_still_gets_the_confirmation_link(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    _, link = await invited(client, settings, smtp, ANA)
    await suppression.suppress(db, ANA, suppression.Reason.OPTED_OUT)

    await press(anonymous_client, link, "apagar")
    await drain(settings)

    mail = smtp.received[-1]
    assert ANA in mail.rcpt_tos
    assert mail.message["Subject"] == "Confirme: apagar seus dados do Convites"


async def test_the_opt_out_page_asks_the_same_way_and_its_link_erases(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, _ = await invited(client, settings, smtp, ANA)
    path = optout_path(settings.secret_key, public_id, ANA)
    await anonymous_client.post(path)  # opted out first: the page offers it in every state
    page = await anonymous_client.get(path)
    assert '<button type="submit" class="secundario">Apagar meus dados</button>' in page.text

    answer = await press(anonymous_client, path, "apagar")

    assert answer.status_code == 202, answer.text
    assert "Confira seu e-mail" in answer.text and f'<a href="{path}">' in answer.text
    await drain(settings)
    text = [m for m in smtp.received if ANA in m.rcpt_tos][-1].message.get_body(("plain",))
    assert text is not None
    found = CONFIRM_LINK.search(text.get_content())
    assert found, text.get_content()
    confirm = found.group(0)
    shown = await anonymous_client.get(confirm)
    await anonymous_client.post(confirm, data={"csrf_token": page_token(shown.text)})
    assert await suppression.reason_for(db, ANA) == suppression.Reason.OPTED_OUT  # by its hash
    assert sum((await rows_naming(db, ANA)).values()) == 0


async def test_an_opt_out_path_we_did_not_sign_mails_nobody(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    public_id, _ = await invited(client, settings, smtp, ANA)
    await drain(settings)
    sent = len(smtp.received)
    token = page_token((await anonymous_client.get("/entrar")).text)

    forged = f"/descadastro/{public_id}/{'A' * 43}/apagar"
    posted = await anonymous_client.post(forged, data={"csrf_token": token})

    assert posted.status_code == 404
    await drain(settings)
    assert len(smtp.received) == sent


async def test_an_unknown_invitation_link_mails_nobody(
    anonymous_client: httpx.AsyncClient, smtp: ScriptedSmtp
) -> None:
    token = page_token((await anonymous_client.get("/entrar")).text)
    path = "/c/" + "x" * 32

    posted = await anonymous_client.post(f"{path}/apagar", data={"csrf_token": token})

    assert posted.status_code == 404
    assert smtp.received == []
