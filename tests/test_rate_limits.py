"""Rate limits in Redis: per sender, per address, per day."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.invites.status import Status
from app.ratelimit import Limit, take
from app.storage.database import Database
from tests.fixtures import drain
from tests.helpers import api_headers, client_for, invite_count, invite_row, page_token
from tests.services import ScriptedSmtp, free_port


async def send(client: httpx.AsyncClient, email: str, **headers: str) -> httpx.Response:
    return await client.post(
        "/convites", json={"email": email}, headers={**await api_headers(client), **headers}
    )


async def test_a_sender_over_the_per_minute_limit_gets_429_and_nothing_is_written(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    async with client_for(replace(settings, sends_per_sender_per_minute=2), smtp=smtp) as browser:
        codes = [(await send(browser, f"p{i}@exemplo.com")).status_code for i in range(3)]
        refused = await send(browser, "p9@exemplo.com")

    assert codes == [202, 202, 429]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert "muitos convites em pouco tempo" in refused.json()["erro"]
    assert await invite_count(db) == 2


async def test_a_form_post_over_the_limit_gets_a_pt_br_page_with_retry_after(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    async with client_for(replace(settings, sends_per_sender_per_minute=1), smtp=smtp) as browser:
        token = page_token((await browser.get("/")).text)
        for n in range(2):
            response = await browser.post(
                "/convites", data={"email": f"f{n}@exemplo.com", "csrf_token": token}
            )

    assert response.status_code == 429
    assert "text/html" in response.headers["content-type"]
    assert "Tente de novo em" in response.text and response.headers["retry-after"]
    assert await invite_count(db) == 1


async def test_the_limit_is_shared_by_every_web_process(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    limited = replace(settings, sends_per_sender_per_minute=2)
    async with client_for(limited, smtp=smtp) as first, client_for(limited) as second:
        assert (await send(first, "a@exemplo.com")).status_code == 202
        assert (await send(first, "b@exemplo.com")).status_code == 202
        second.cookies = first.cookies  # the same browser, routed to another process

        assert (await send(second, "c@exemplo.com")).status_code == 429
    assert await invite_count(db) == 2


async def test_many_senders_behind_one_address_share_the_address_limit(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    limited = replace(settings, sends_per_address_per_minute=3)
    codes = []
    for i in range(4):
        # A new sender each time, same address.
        async with client_for(limited, smtp=smtp, email=f"s{i}@exemplo.com") as browser:
            codes.append((await send(browser, "x@exemplo.com")).status_code)

    assert codes == [202, 202, 202, 429]
    assert await invite_count(db) == 3


async def test_a_spoofed_forwarded_for_does_not_escape_the_address_limit(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    limited = replace(settings, sends_per_address_per_minute=1)
    codes = []
    for i in range(2):
        async with client_for(limited, smtp=smtp, email=f"s{i}@exemplo.com") as browser:
            response = await send(browser, "x@exemplo.com", **{"X-Forwarded-For": f"10.0.0.{i}"})
            codes.append(response.status_code)
    assert codes == [202, 429]


async def test_behind_a_trusted_proxy_the_forwarded_address_is_the_one_limited(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    limited = replace(settings, sends_per_address_per_minute=1, trust_proxy_headers=True)
    codes = []
    for i, address in enumerate(("10.0.0.1", "10.0.0.2", "10.0.0.1")):
        async with client_for(limited, smtp=smtp, email=f"s{i}@exemplo.com") as browser:
            forwarded = f"203.0.113.9, {address}"  # the client may prepend anything
            response = await send(browser, "x@exemplo.com", **{"X-Forwarded-For": forwarded})
            codes.append(response.status_code)
    assert codes == [202, 202, 429]


async def test_the_daily_cap_per_sender_refuses_until_its_window_ends(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    async with client_for(replace(settings, sends_per_sender_per_day=2), smtp=smtp) as browser:
        for i in range(2):
            assert (await send(browser, f"d{i}@exemplo.com")).status_code == 202
        refused = await send(browser, "d9@exemplo.com")

    assert refused.status_code == 429
    assert 3600 < int(refused.headers["retry-after"]) <= 24 * 3600
    assert "limite de 2 convites por dia" in refused.json()["erro"]
    assert await invite_count(db) == 2


async def test_a_refused_request_does_not_use_up_the_daily_cap(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    limited = replace(settings, sends_per_sender_per_minute=1, sends_per_sender_per_day=2)
    async with client_for(limited, smtp=smtp) as browser:
        assert (await send(browser, "a@exemplo.com")).status_code == 202
        for _ in range(3):
            assert (await send(browser, "b@exemplo.com")).status_code == 429
        cookies = browser.cookies
    # A minute later only the per-minute window has ended; the day still has room for one.
    async with client_for(replace(limited, sends_per_sender_per_minute=5)) as later:
        later.cookies = cookies
        assert (await send(later, "c@exemplo.com")).status_code == 202


async def test_resending_counts_against_the_limit(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    async with client_for(replace(settings, sends_per_sender_per_minute=1), smtp=smtp) as browser:
        smtp.always("550 5.1.1 No such user")
        created = (await send(browser, "r@exemplo.com")).json()
        await drain(settings)
        refused = await browser.post(
            f"/convites/{created['id']}/reenviar", headers=await api_headers(browser)
        )

    assert refused.status_code == 429 and refused.headers["retry-after"]
    assert (await invite_row(db, created["id"])).status == Status.FALHOU


async def test_with_redis_down_invites_are_still_accepted_and_the_pass_is_logged(
    settings: Settings, db: Database, caplog: pytest.LogCaptureFixture, smtp: ScriptedSmtp
) -> None:
    no_redis = replace(settings, redis_url=f"redis://127.0.0.1:{free_port()}/0")
    async with client_for(settings, smtp=smtp) as signed_in:
        cookies = signed_in.cookies  # sessions live in the database, not in Redis
    async with client_for(no_redis) as browser:
        browser.cookies = cookies
        response = await browser.post(
            "/convites", json={"email": "sem-redis@exemplo.com"}, headers=await api_headers(browser)
        )

    assert response.status_code == 202
    assert (await invite_row(db, response.json()["id"])).status == Status.PENDENTE
    assert "rate limiter unavailable; request allowed" in caplog.text


async def test_concurrent_requests_never_both_take_the_last_unit(redis: Redis) -> None:
    per_sender = Limit("sender_minute", "convites:limite:teste:remetente", 5, 60)

    answers = await asyncio.gather(
        *(
            take(redis, [per_sender, Limit("x", f"convites:limite:teste:{n}", 99, 60)])
            for n in range(20)
        )
    )

    assert [answer is None for answer in answers].count(True) == 5
    assert {answer.limit.kind for answer in answers if answer is not None} == {"sender_minute"}
    assert await redis.get("convites:limite:teste:remetente") == b"5"


async def test_refused_invites_do_not_use_up_an_addresses_day(
    settings: Settings, db: Database, smtp: ScriptedSmtp
) -> None:
    strict = replace(settings, invites_per_recipient_per_day=3)
    async with client_for(strict, smtp=smtp, email="intruso@exemplo.com") as intruder:
        assert (await send(intruder, "alvo@exemplo.com")).status_code == 202
        repeats = [(await send(intruder, "alvo@exemplo.com")).status_code for _ in range(4)]
    codes = []
    for i in range(3):
        async with client_for(strict, smtp=smtp, email=f"real{i}@exemplo.com") as sender:
            codes.append((await send(sender, "alvo@exemplo.com")).status_code)

    assert repeats == [409, 409, 409, 409]
    assert codes == [202, 202, 429]  # the intruder's one written invite counts, its 409s do not
    assert await invite_count(db) == 3


async def test_refused_corrections_and_resends_do_not_use_up_an_addresses_day(
    settings: Settings, smtp: ScriptedSmtp
) -> None:
    strict = replace(settings, invites_per_recipient_per_day=2)
    async with client_for(strict, smtp=smtp, email="intruso@exemplo.com") as intruder:
        created = (await send(intruder, "outro@exemplo.com")).json()
        headers = await api_headers(intruder)
        url = f"/convites/{created['id']}"
        corrected = [
            await intruder.post(
                f"{url}/corrigir", json={"email": "alvo@exemplo.com"}, headers=headers
            )
            for _ in range(2)
        ]
        resent = await intruder.post(f"{url}/reenviar", headers=headers)
    codes = []
    for i in range(2):
        async with client_for(strict, smtp=smtp, email=f"real{i}@exemplo.com") as sender:
            codes.append((await send(sender, "alvo@exemplo.com")).status_code)
    async with client_for(strict, smtp=smtp, email="real@exemplo.com") as sender:
        codes.append((await send(sender, "outro@exemplo.com")).status_code)

    assert [r.status_code for r in corrected] == [409, 409]  # pendente: nothing to correct
    assert resent.status_code == 409  # pendente: nothing to re-send
    assert codes == [202, 202, 202]  # only the intruder's one written invite counted
