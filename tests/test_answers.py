"""The invitee's link: the real mail carries it, opening it changes nothing, Aceitar convite and
Recusar record a final answer (and sign nobody in: tests/test_account_sessions.py), and a closed
link is 410.
Real worker (burst), real SMTP capture, the in-process app."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.exc import IntegrityError

from app.clock import utcnow
from app.config import Settings
from app.invites import transitions
from app.invites.status import Status
from app.storage.database import Database
from app.storage.tables import invite_links as links_table
from tests.answering import invited, press
from tests.helpers import (
    JSON,
    api_headers,
    client_for,
    csrf_token,
    invite_row,
    page_token,
    post_invite,
    statuses,
)
from tests.services import ScriptedSmtp


async def test_the_mail_carries_a_random_link_only_its_hash_is_stored_and_the_message(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    public_id, path = await invited(
        client, settings, smtp, mensagem="Vem para o churrasco!\nSábado às 13h."
    )
    token = path.removeprefix("/c/")
    text = smtp.received[-1].text

    assert len(token) >= 22  # ≥ 128 bits of URL-safe base64
    assert f"{settings.public_url}/c/{token}" in text
    assert "Vem para o churrasco!\nSábado às 13h." in text
    assert "Marta Souza (marta@exemplo.com) convidou você" in text
    async with db.read() as conn:
        stored = (await conn.execute(select(links_table))).all()
    assert len(stored) == 1 and token not in str(stored)
    assert (await invite_row(db, public_id)).message == "Vem para o churrasco!\nSábado às 13h."
    mine = (await client.get(f"/convites/{public_id}", headers=JSON)).json()
    assert mine["mensagem_pessoal"] == "Vem para o churrasco!\nSábado às 13h."
    assert "Sua mensagem:" in (await client.get(f"/convites/{public_id}")).text


async def test_opening_the_link_shows_who_invites_the_message_and_two_buttons_and_records_nothing(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, path = await invited(client, settings, smtp, mensagem="Bem-vinda!")
    before = await statuses(db, public_id)

    page = await anonymous_client.get(path)
    again = await anonymous_client.get(path)

    assert page.status_code == 200 and again.status_code == 200
    html = page.text
    assert "Marta Souza" in html and "marta@exemplo.com" in html and "Bem-vinda!" in html
    assert html.index("Marta Souza") < html.index("Bem-vinda!") < html.index("Aceitar convite")
    assert html.index("Aceitar convite") < html.index("Recusar")
    assert f'action="{path}/aceitar"' in html and f'action="{path}/recusar"' in html
    assert await statuses(db, public_id) == before  # scanners prefetch links: GET is inert


async def test_accepting_records_aceito_and_the_link_says_whose_invitation(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, path = await invited(client, settings, smtp, nome="Ana Lima")

    answered = await press(anonymous_client, path, "aceitar")

    assert answered.status_code == 303 and answered.headers["location"] == path
    assert (await invite_row(db, public_id)).status == Status.ACEITO
    page = await anonymous_client.get(path)
    assert "Você aceitou o convite de Marta Souza" in page.text
    assert "peça um link de acesso" in page.text and 'href="/entrar"' in page.text
    sender_view = (await client.get(f"/convites/{public_id}", headers=JSON)).json()
    assert sender_view["mensagem"] == "Ana Lima aceitou o convite."  # named, not the address


async def test_opening_the_link_again_after_answering_says_so_with_200_and_no_second_event(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    await press(anonymous_client, path, "aceitar")
    events = await statuses(db, public_id)

    async with client_for(settings) as stranger:
        page = await stranger.get(path)
        pressed_again = await stranger.post(
            f"{path}/aceitar", data={"csrf_token": await csrf_token(stranger)}
        )

    assert page.status_code == 200 and "Você aceitou o convite de Marta Souza" in page.text
    assert "Aceitar convite" not in page.text
    assert pressed_again.status_code == 200 and "Você aceitou" in pressed_again.text
    assert await statuses(db, public_id) == events
    assert [status for status, _ in events].count("aceito") == 1


async def test_declining_is_recorded_once_and_is_final(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, path = await invited(client, settings, smtp)

    declined = await press(anonymous_client, path, "recusar")

    assert declined.status_code == 303 and declined.headers["location"] == path
    page = await anonymous_client.get(path)
    assert "Você recusou o convite de Marta Souza" in page.text
    assert "Mudou de ideia? Peça a Marta Souza que envie o convite de novo." in page.text
    main = page.text.split("<main", 1)[1]
    assert "Recusar" not in main and "Aceitar convite" not in main
    assert (await anonymous_client.get("/conta")).status_code == 303  # not signed in
    assert (await client.get(f"/convites/{public_id}", headers=JSON)).json()["mensagem"] == (
        "ana@exemplo.com.br recusou o convite."
    )
    declined_twice = await anonymous_client.post(
        f"{path}/recusar", data={"csrf_token": await csrf_token(anonymous_client)}
    )
    assert declined_twice.status_code == 200
    assert [s for s, _ in await statuses(db, public_id)].count("recusado") == 1


async def test_an_answer_without_the_csrf_token_is_refused_and_records_nothing(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    await anonymous_client.get(path)

    refused = await anonymous_client.post(f"{path}/aceitar", data={})

    assert refused.status_code == 403
    assert (await invite_row(db, public_id)).status == Status.ENVIADO


async def test_two_clicks_at_once_record_one_answer(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    """The conditional answer: without ``status IN (…)`` both clicks would write an event."""
    public_id, path = await invited(client, settings, smtp)
    token = path.removeprefix("/c/")

    both = await asyncio.gather(
        transitions.accept(db, token, settings.invite_ttl_seconds),
        transitions.accept(db, token, settings.invite_ttl_seconds),
    )

    assert sum(change is not None for change in both) == 1
    assert [s for s, _ in await statuses(db, public_id)].count("aceito") == 1


async def test_an_unknown_link_is_404_and_says_what_to_do(
    anonymous_client: httpx.AsyncClient,
) -> None:
    page = await anonymous_client.get("/c/" + "x" * 32)

    assert page.status_code == 404
    assert "Link de convite não encontrado" in page.text and "Traceback" not in page.text


async def invite_row_by_email(client: httpx.AsyncClient) -> str:
    """The sender's newest invite's page path (from the JSON list)."""
    listed = (await client.get("/convites", headers=JSON)).json()["convites"]
    url: str = listed[0]["url"]
    return url


async def test_markup_in_the_message_is_inert_in_the_page_and_the_mail(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    markup = '<script>alert("x")</script><b onclick="x()">oi</b> & <a href="//mal">clique</a>'
    _, path = await invited(client, settings, smtp, mensagem=markup)

    page = (await anonymous_client.get(path)).text
    mail = smtp.received[-1].message
    html = mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
    text = mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    public_id = (await invite_row_by_email(client)).removeprefix("/convites/")
    sender_page = (await client.get(f"/convites/{public_id}")).text

    for shown in (page, html):
        assert "<script>alert" not in shown and "<b onclick" not in shown
        assert '<a href="//mal">' not in shown
        assert "&lt;script&gt;alert(" in shown
    assert markup in text  # plain text is plain: nothing there runs
    assert "Sua mensagem:" in sender_page
    assert "<script>alert" not in sender_page and "&lt;script&gt;alert(" in sender_page


async def test_a_message_over_500_characters_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, db: Database
) -> None:
    response = await client.post(
        "/convites",
        json={"email": "ana@exemplo.com", "mensagem": "a" * 501},
        headers=await api_headers(client),
    )

    assert response.status_code == 422
    assert "no máximo 500 caracteres" in response.json()["campos"]["mensagem"]
    async with db.read() as conn:
        rows = (await conn.execute(select(func.count()).select_from(links_table))).scalar()
    assert rows == 0


async def test_an_incerto_invite_whose_mail_did_arrive_is_accepted_through_its_link(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    """The worker's own steps when the connection breaks mid-DATA: the claim, the link issued
    before the mail leaves, ``incerto``. The mail did arrive: the invitee opens its link."""
    created = await post_invite(client, "ana@exemplo.com.br")
    claim = await transitions.claim_with_link(db, created["id"], 1, 60)
    assert claim is not None
    path = f"/c/{claim.link}"
    assert await transitions.mark_uncertain(
        db, claim.change.invite, "A conexão caiu no meio do envio."
    )

    answered = await press(anonymous_client, path, "aceitar")

    assert answered.status_code == 303
    assert (await invite_row(db, created["id"])).status == Status.ACEITO


async def test_the_invite_page_history_shows_every_step_with_its_time(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    public_id, path = await invited(client, settings, smtp)
    await press(anonymous_client, path, "aceitar")

    page = (await client.get(f"/convites/{public_id}")).text
    history = page.split("Histórico", 1)[1]

    steps = ["Criado: na fila para envio", "Tentativa 1: enviando", "Tentativa 1: enviado"]
    steps.append("Aceito pela pessoa convidada")
    positions = [history.index(step) for step in steps]
    assert positions == sorted(positions)
    assert history.count("<time datetime=") == 4


async def test_issuing_a_new_link_replaces_the_old_one(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    """One live link per invite: a retry's claim issues a new link, and without
    ``replace_links`` in ``issue_for_claims`` both would answer (and the database's partial
    unique index would refuse the second)."""
    created = await post_invite(client, "ana@exemplo.com.br")
    first = await transitions.claim_with_link(db, created["id"], 1, 60)
    assert first is not None
    old = f"/c/{first.link}"
    assert await transitions.schedule_retry(db, first.change.invite, "421 ocupado", 0)
    claim = await transitions.claim_with_link(db, created["id"], 2, 60)
    assert claim is not None
    new = f"/c/{claim.link}"
    assert await transitions.mark_sent(db, claim.change.invite)

    assert (await anonymous_client.get(old)).status_code == 410
    assert "substituído" in (await anonymous_client.get(old)).text
    fresh = await anonymous_client.get(new)
    assert fresh.status_code == 200
    token = page_token(fresh.text)
    pressed_old = await anonymous_client.post(f"{old}/aceitar", data={"csrf_token": token})
    assert pressed_old.status_code == 410
    assert (await invite_row(db, created["id"])).status == Status.ENVIADO


async def test_an_accepted_link_opened_by_the_signed_in_invitee_says_so(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    """Signed in the one way there is (a link mailed on request), the invitee is told so."""
    _, path = await invited(client, settings, smtp)
    await press(anonymous_client, path, "aceitar")

    async with client_for(settings, smtp=smtp, email="ana@exemplo.com.br") as invitee:
        here = (await invitee.get(path)).text
    there = (await anonymous_client.get(path)).text

    assert "Você está no Convites como" in here
    assert "Você está no Convites como" not in there
    assert "peça um link de acesso" in there and 'href="/entrar"' in there


async def test_a_stalled_worker_cannot_replace_the_link_of_a_newer_attempt(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    db: Database,
) -> None:
    """Attempt 1 stalls past its lease (incerto), the person re-sends, attempt 2 goes out with
    its link; then attempt 1's job comes again: its claim loses (no link, so it sends nothing)
    and the newest mail's link keeps working."""
    created = await post_invite(client, "ana@exemplo.com.br")
    stalled = await transitions.claim_with_link(db, created["id"], 1, 60)
    assert stalled is not None
    assert await transitions.mark_uncertain(db, stalled.change.invite, "prazo esgotado")
    assert await transitions.claim_with_link(db, created["id"], 1, 60) is None, "no link, no send"
    assert await transitions.request_resend(db, stalled.change.invite.sender_id, created["id"])
    second = await transitions.claim_with_link(db, created["id"], 2, 60)
    assert second is not None
    newest = f"/c/{second.link}"

    assert await transitions.claim_with_link(db, created["id"], 1, 60) is None
    assert await transitions.mark_sent(db, stalled.change.invite) is None
    assert (await anonymous_client.get(newest)).status_code == 409  # still enviando: not yet
    assert await transitions.mark_sent(db, second.change.invite)
    assert (await anonymous_client.get(newest)).status_code == 200


async def test_the_database_refuses_a_second_live_link_for_one_invite(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    invite = await invite_row(db, public_id)

    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await conn.execute(
                insert(links_table).values(
                    token_hash="0" * 64,
                    invite_id=invite.id,
                    attempt=1,
                    created_at=utcnow(),
                    replaced_at=None,
                )
            )


async def test_addresses_in_the_message_are_never_links_and_the_mail_names_its_only_link(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    fake = f"{settings.public_url}/c/AAAAAAAAAAAAAAAAAAAAAAAA"
    _, path = await invited(
        client, settings, smtp, mensagem=f"CONFIRME AQUI: {fake}\nou www.convites-br.com"
    )

    mail = smtp.received[-1].message
    html = mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
    text = mail.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    page = (await anonymous_client.get(path)).text

    for body in (html, text):
        # No mail client can make a link of what the sender wrote: no dotted host is left whole.
        assert fake not in body and "www.convites-br.com" not in body
        assert "CONFIRME AQUI: http[:]//" in body
        assert (
            "www[.]convites-br[.]com" in body and "Endereços na mensagem aparecem sem link" in body
        )
        assert "Os links abaixo são os únicos links do Convites neste e-mail." in body
        assert body.count(f"{settings.public_url}/c/") == 1  # ours, only
    # Ours only: the answer link, and the way out (app.consent.optout).
    assert html.count("<a ") == 2 and f'<a href="{settings.public_url}{path}">' in html
    assert html.count(f'<a href="{settings.public_url}/descadastro/') == 1
    # The page is ours: the message is text in it, never an <a>.
    assert f"CONFIRME AQUI: {fake}" in page and f'href="{fake}' not in page
