"""The worker's claim issues the invitation's link in the same transaction, and a claim that
stalled until less than half its lease is left sends nothing and is given back."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from arq.connections import ArqRedis
from sqlalchemy import select

from app.accounts.sessions import token_hash
from app.config import Settings
from app.invites import transitions
from app.invites.records import SIGNIN_MAIL
from app.invites.status import Status
from app.sending import attempt, worker
from app.sending.mailer import SendProgress
from app.storage.database import Database
from app.storage.tables import invite_links, invites
from tests.fixtures import MovableClock
from tests.helpers import JSON, invite_row, post_invite
from tests.services import ScriptedSmtp


async def test_the_claim_issues_the_link_and_replaces_the_older_attempts(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    created = await post_invite(client, "ana@exemplo.com.br")
    first = await transitions.claim_with_link(db, created["id"], 1, 60)
    assert first is not None and first.link is not None
    assert first.change.invite.status == Status.ENVIANDO
    assert await transitions.claim_with_link(db, created["id"], 1, 60) is None, "claimed once"
    assert (await anonymous_client.get(f"/c/{first.link}")).status_code == 409  # not sent yet
    assert await transitions.mark_uncertain(db, first.change.invite, "prazo esgotado")
    assert (await anonymous_client.get(f"/c/{first.link}")).status_code == 200  # it may have left

    assert await transitions.request_resend(db, first.change.invite.sender_id, created["id"])
    second = await transitions.claim_with_link(db, created["id"], 2, 60)
    assert second is not None and second.link not in (None, first.link)
    assert await transitions.mark_sent(db, second.change.invite)
    assert (await anonymous_client.get(f"/c/{first.link}")).status_code == 410  # replaced
    assert (await anonymous_client.get(f"/c/{second.link}")).status_code == 200


async def test_claims_made_together_each_get_their_own_link_and_a_repeat_gets_none(
    client: httpx.AsyncClient, db: Database
) -> None:
    ids = [(await post_invite(client, f"p{n}@exemplo.com.br"))["id"] for n in range(4)]
    claims = await asyncio.gather(
        *(transitions.claim_with_link(db, public_id, 1, 60) for public_id in [*ids, ids[0]])
    )

    won = [claim for claim in claims if claim is not None]
    assert (claims[0] is None) != (claims[-1] is None)  # the repeat of the first: one wins
    assert sorted(claim.change.invite.public_id for claim in won) == sorted(ids)
    async with db.read() as conn:
        live = dict(
            (
                await conn.execute(
                    select(invite_links.c.token_hash, invite_links.c.invite_id).where(
                        invite_links.c.replaced_at.is_(None)
                    )
                )
            ).all()
        )
    # One live link per invite, and each claim holds the one of its own invite.
    assert sorted(live.values()) == sorted(claim.change.invite.id for claim in won)
    assert all(live[token_hash(str(claim.link))] == claim.change.invite.id for claim in won)


async def test_a_sign_in_mail_is_claimed_without_an_invitation_link(
    anonymous_client: httpx.AsyncClient, db: Database
) -> None:
    token = (await anonymous_client.get("/entrar", headers=JSON)).json()["csrf_token"]
    asked = await anonymous_client.post(
        "/entrar", json={"email": "bia@exemplo.com.br"}, headers={**JSON, "X-CSRF-Token": token}
    )
    assert asked.status_code < 400
    async with db.read() as conn:
        public_id = (
            await conn.execute(select(invites.c.public_id).where(invites.c.kind == SIGNIN_MAIL))
        ).scalar_one()
    claimed = await transitions.claim_with_link(db, public_id, 1, 60)
    assert claimed is not None and claimed.link is None


async def _worker_context(settings: Settings) -> dict[str, Any]:
    ctx: dict[str, Any] = {"settings": settings, "redis": ArqRedis.from_url(settings.redis_url)}
    await worker.startup(ctx)
    return ctx


async def test_a_claim_that_stalled_past_half_its_lease_sends_nothing_and_is_given_back(
    client: httpx.AsyncClient,
    db: Database,
    settings: Settings,
    smtp: ScriptedSmtp,
    clock: MovableClock,
) -> None:
    created = await post_invite(client, "caio@exemplo.com.br")
    lease = settings.sending_lease_seconds
    ctx = await _worker_context(settings)
    try:
        claimed = await transitions.claim_with_link(db, created["id"], 1, lease)
        assert claimed is not None
        clock.advance(lease * 0.6)  # stalled (on Redis, say) until less than half the lease is left

        outcome = await attempt._deliver(ctx, claimed.change.invite, claimed.link, SendProgress())

        assert outcome is not None and outcome.invite.status == Status.PENDENTE
        assert smtp.received == []
        assert (await invite_row(db, created["id"])).status == Status.PENDENTE

        again = await transitions.claim_with_link(db, created["id"], 1, lease)
        assert again is not None  # the same attempt, claimed afresh, goes out
        sent = await attempt._deliver(ctx, again.change.invite, again.link, SendProgress())
        assert sent is not None and sent.invite.status == Status.ENVIADO
        assert len(smtp.received) == 1 and again.link is not None
        assert again.link in smtp.received[0].message.get_body(("plain",)).get_content()
    finally:
        await worker.shutdown(ctx)
        await ctx["redis"].aclose()
