"""The invitee's way out, over the real app: the headers and links in the real mail, the RFC
8058 one-click POST from a client with no cookie, the page that records nothing until the
person confirms, the way back, and the one path the CSRF check lets through."""

from __future__ import annotations

from datetime import timedelta

import httpx

from app.bounces.addresses import opt_out_address
from app.clock import utcnow
from app.config import Settings
from app.consent import suppression
from app.consent.optout import UNDO_COOKIE, optout_path, undo_token
from app.consent.suppression import Reason
from app.invites.queries import invite_history
from app.invites.status import Status
from app.signing import FULL, Purpose, sign
from app.storage.database import Database
from tests.answering import invited, optout_url_of, press
from tests.helpers import api_headers, client_for, invite_row, page_token, schedule
from tests.services import ScriptedSmtp

ONE_CLICK = {"List-Unsubscribe": "One-Click"}
INVITEE = "ana@exemplo.com.br"  # invited()'s


async def test_every_invitation_carries_list_unsubscribe_one_click_and_the_link_in_both_parts(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp
) -> None:
    public_id, _ = await invited(client, settings, smtp)

    mail = smtp.received[-1].message
    url = f"{settings.public_url}{optout_path(settings.secret_key, public_id, INVITEE)}"
    header = str(mail["List-Unsubscribe"])
    mailto = opt_out_address(settings.return_path, settings.secret_key, public_id, INVITEE)
    assert header == f"<{url}>, <mailto:{mailto}?subject=descadastro>"
    assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    text = mail.get_body(("plain",)).get_content().replace("\r\n", "\n")  # type: ignore[union-attr]
    html = mail.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert f"Não quero receber convites:\n{url}" in text
    assert f'<a href="{url}">Não quero receber convites</a>' in html


async def test_the_invitation_page_offers_the_way_out_below_the_two_answers_then_the_way_back(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
) -> None:
    public_id, link = await invited(client, settings, smtp)

    page = (await anonymous_client.get(link)).text

    path = optout_path(settings.secret_key, public_id, INVITEE)
    assert page.index("Aceitar convite") < page.index("Recusar") < page.index(path)
    assert f'<a href="{path}">Não quero receber convites</a>' in page

    await anonymous_client.post(path)
    after = (await anonymous_client.get(link)).text

    assert (
        "Ninguém consegue mais convidar <strong>ana@exemplo.com.br</strong> pelo Convites: "
        "você pediu para não receber convites." in after
    )
    assert f'Dá para <a href="{path}">voltar a receber convites</a> no navegador' in after
    # Not offered again, and no new invitation suggested: it would be refused.
    assert "Não quero receber convites" not in after
    assert "envie o convite de novo" not in after
    resent = await client.post(f"/convites/{public_id}/reenviar", headers=await api_headers(client))
    assert resent.status_code == 422
    # The way back is where the page says, in this browser.
    assert "Quero voltar a receber convites" in (await anonymous_client.get(path)).text


async def test_a_one_click_post_without_a_cookie_opts_out_at_once_and_again_changes_nothing(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    url = optout_url_of(smtp, "ana@exemplo.com.br")

    # A mail provider's request: no cookie jar, no CSRF token, only the RFC 8058 body.
    async with client_for(settings) as provider:
        first = await provider.post(url, data=ONE_CLICK)
        again = await provider.post(url, data=ONE_CLICK)
        assert not provider.cookies.get("convites_sessao")

    assert (first.status_code, again.status_code) == (200, 200)
    assert await suppression.reason_for(db, "Ana@Exemplo.com.br ") == Reason.OPTED_OUT
    row = await invite_row(db, public_id)
    assert (row.status, row.error) == (Status.RECUSADO, suppression.ROW_NOTES[Reason.OPTED_OUT])
    recusados = [e for e in await invite_history(db, row.id) if e.status == Status.RECUSADO]
    assert len(recusados) == 1  # the same opt-out twice is one event


async def test_a_link_mailed_before_links_named_their_address_still_opts_out(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    by_id_only = sign(settings.secret_key, Purpose.OPT_OUT_LINK, public_id, length=FULL)

    async with client_for(settings) as provider:
        done = await provider.post(f"/descadastro/{public_id}/{by_id_only}", data=ONE_CLICK)

    assert done.status_code == 200
    assert await suppression.reason_for(db, INVITEE) == Reason.OPTED_OUT


async def test_opening_the_link_records_nothing_until_the_person_confirms_then_offers_the_way_back(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    path = optout_path(settings.secret_key, public_id, INVITEE)

    opened = await anonymous_client.get(path)
    assert opened.status_code == 200 and "Não quer receber convites?" in opened.text
    assert await suppression.reason_for(db, "ana@exemplo.com.br") is None
    assert (await invite_row(db, public_id)).status == Status.ENVIADO

    confirmed = await anonymous_client.post(path)
    assert (confirmed.status_code, confirmed.headers["location"]) == (303, path)
    done = await anonymous_client.get(path)
    assert "Pronto: você não vai mais receber convites" in done.text
    assert "Quero voltar a receber convites" in done.text
    assert await suppression.reason_for(db, "ana@exemplo.com.br") == Reason.OPTED_OUT

    back = await anonymous_client.post(f"{path}/voltar", data={"csrf_token": page_token(done.text)})
    assert back.status_code == 303
    assert await suppression.reason_for(db, "ana@exemplo.com.br") is None
    again = await anonymous_client.get(back.headers["location"])
    assert "volta a receber convites" in again.text and "Não quer receber convites?" in again.text


async def test_the_senders_row_says_what_the_invitee_did_and_stays_true_after_the_way_back(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, _ = await invited(client, settings, smtp, nome="Ana Lima")
    path = optout_path(settings.secret_key, public_id, INVITEE)
    await anonymous_client.post(path)
    done = await anonymous_client.get(path)

    await anonymous_client.post(f"{path}/voltar", data={"csrf_token": page_token(done.text)})

    assert await suppression.reason_for(db, "ana@exemplo.com.br") is None
    page = (await client.get("/")).text
    # Named as an answer names them ("Ana Lima recusou o convite.").
    assert "Ana Lima: Pediu para não receber convites." in page
    assert "não recebe mais convites" not in page  # no longer true: it would lie
    assert f"/convites/{public_id}/reenviar" not in page  # re-inviting them is the form's call


async def test_the_way_back_lifts_only_an_opt_out_not_a_bounce_or_a_complaint(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, link = await invited(client, settings, smtp)
    await suppression.suppress(db, "ana@exemplo.com.br", Reason.COMPLAINED, "abuse")
    path = optout_path(settings.secret_key, public_id, INVITEE)

    page = await anonymous_client.get(path)
    assert "Este endereço não recebe convites" in page.text
    assert "Quero voltar" not in page.text
    invitation = (await anonymous_client.get(link)).text
    assert "pelo Convites: este endereço não recebe convites." in invitation
    assert "Não quero receber convites" not in invitation and "voltar a receber" not in invitation
    token = page_token(invitation)
    # Even a browser holding this link's way back cannot lift what the person did not put.
    anonymous_client.cookies.set(UNDO_COOKIE, undo_token(settings.secret_key, public_id))
    await anonymous_client.post(f"{path}/voltar", data={"csrf_token": token})
    anonymous_client.cookies.delete(UNDO_COOKIE)
    refused = await anonymous_client.post(f"{path}/voltar", data={"csrf_token": token})

    assert await suppression.reason_for(db, "ana@exemplo.com.br") == Reason.COMPLAINED
    # Refused, the page says what is true: a block, not an opt-out of the person's own.
    assert refused.status_code == 403
    assert "Este endereço não recebe convites" in refused.text
    assert "você pediu para sair" not in refused.text


async def test_only_the_browser_that_opted_out_may_take_it_back(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    """The mail can be forwarded: its reader may opt the address out, never undo its owner's."""
    public_id, _ = await invited(client, settings, smtp)
    path = optout_path(settings.secret_key, public_id, INVITEE)
    await anonymous_client.post(path)  # the owner, in their browser

    async with client_for(settings) as forwarded:
        page = await forwarded.get(path)
        again = await forwarded.post(path, data={"csrf_token": page_token(page.text)})
        page = await forwarded.get(path)  # opting out again gave it no way back either
        refused = await forwarded.post(f"{path}/voltar", data={"csrf_token": page_token(page.text)})

    assert again.status_code == 303 and "Quero voltar" not in page.text
    assert "no navegador em que você pediu para sair" in page.text
    assert refused.status_code == 403
    assert await suppression.reason_for(db, "ana@exemplo.com.br") == Reason.OPTED_OUT
    owner = await anonymous_client.get(path)
    assert "Quero voltar a receber convites" in owner.text


async def test_a_bad_signature_is_refused_and_records_nothing(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    public_id, _ = await invited(client, settings, smtp)
    forged = f"/descadastro/{public_id}/{'A' * 43}"
    other_key = optout_path("another-secret-key-of-someone-else", public_id, INVITEE)

    async with client_for(settings) as stranger:
        for path in (forged, other_key):
            assert (await stranger.post(path, data=ONE_CLICK)).status_code == 404
            assert (await stranger.get(path)).status_code == 404

    assert await suppression.reason_for(db, "ana@exemplo.com.br") is None
    assert (await invite_row(db, public_id)).status == Status.ENVIADO


async def test_csrf_lets_through_only_the_signed_one_click_path(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    """Without a token: the way back and the answers are 403; a path under the prefix that
    no endpoint takes is 404."""
    public_id, link = await invited(client, settings, smtp)
    path = optout_path(settings.secret_key, public_id, INVITEE)
    await suppression.suppress(db, "ana@exemplo.com.br", Reason.OPTED_OUT)

    async with client_for(settings) as stranger:
        for unsafe in (f"{path}/voltar", f"{link}/recusar", f"{link}/aceitar"):
            refused = await stranger.post(unsafe, data=ONE_CLICK)
            assert refused.status_code == 403, unsafe
        assert (await stranger.post(f"{path}/x", data=ONE_CLICK)).status_code == 404

    assert await suppression.reason_for(db, "ana@exemplo.com.br") == Reason.OPTED_OUT
    assert (await invite_row(db, public_id)).status == Status.ENVIADO


async def test_an_answered_invitation_keeps_its_answer_and_its_address_still_opts_out(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    public_id, link = await invited(client, settings, smtp)
    await press(anonymous_client, link, "aceitar")

    async with client_for(settings) as provider:
        answer = await provider.post(optout_url_of(smtp, "ana@exemplo.com.br"), data=ONE_CLICK)

    assert answer.status_code == 200
    assert (await invite_row(db, public_id)).status == Status.ACEITO
    assert await suppression.reason_for(db, "ana@exemplo.com.br") == Reason.OPTED_OUT


async def test_a_scheduled_invitation_to_the_address_is_called_off_at_the_opt_out(
    client: httpx.AsyncClient, settings: Settings, smtp: ScriptedSmtp, db: Database
) -> None:
    """Another sender's invitation waiting for its moment: at that moment the worker would
    refuse it, so it is cancelled now, with the reason; its row stops promising a send and no
    pendente or enviando is recorded for a mail that was never to go."""
    await invited(client, settings, smtp)
    async with client_for(settings, smtp=smtp, email="bia@exemplo.com") as other:
        scheduled = await schedule(other, "Ana@exemplo.com.br", utcnow() + timedelta(days=2))
        assert scheduled.json()["status"] == "agendado"

        async with client_for(settings) as provider:
            await provider.post(optout_url_of(smtp, INVITEE), data=ONE_CLICK)

        row = await invite_row(db, scheduled.json()["id"])
        note = suppression.NOT_SENT.format(refusal=suppression.REFUSALS[Reason.OPTED_OUT])
        assert (row.status, row.error) == (Status.CANCELADO, note)
        history = await invite_history(db, row.id)
        assert [event.status for event in history] == [Status.AGENDADO, Status.CANCELADO]
        page = (await other.get("/")).text
        assert suppression.REFUSALS[Reason.OPTED_OUT] in page and "Sai nessa hora" not in page
        assert "O convite não foi enviado" not in page  # the headline says it; the reason, why


async def test_taking_the_opt_out_back_restores_the_scheduled_invitations_it_called_off(
    client: httpx.AsyncClient,
    anonymous_client: httpx.AsyncClient,
    settings: Settings,
    smtp: ScriptedSmtp,
    db: Database,
) -> None:
    """A mistaken click undone in time: the other sender's invitation goes at its moment, as if
    the opt-out had never been; the way back promises no less."""
    public_id, _ = await invited(client, settings, smtp)
    async with client_for(settings, smtp=smtp, email="bia@exemplo.com") as other:
        scheduled = await schedule(other, INVITEE, utcnow() + timedelta(days=2))
    path = optout_path(settings.secret_key, public_id, INVITEE)
    await anonymous_client.post(path)
    assert (await invite_row(db, scheduled.json()["id"])).status == Status.CANCELADO

    done = await anonymous_client.get(path)
    await anonymous_client.post(f"{path}/voltar", data={"csrf_token": page_token(done.text)})

    row = await invite_row(db, scheduled.json()["id"])
    assert (row.status, row.error) == (Status.AGENDADO, None)
    history = await invite_history(db, row.id)
    assert [e.status for e in history] == [Status.AGENDADO, Status.CANCELADO, Status.AGENDADO]
