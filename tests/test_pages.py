"""The HTML the browser gets: live regions, pinned scripts, rows that carry what the page needs."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import httpx
from redis.asyncio import Redis

from app.config import Settings
from app.invites import queries, transitions
from app.sending.heartbeat import WORKERS, beat
from app.storage.database import Database
from tests.fixtures import MovableClock
from tests.helpers import csrf_token, invite_row, page_token, post_invite

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "static" / "vendor"
HTMX = {"HX-Request": "true"}


async def test_the_page_starts_with_empty_live_regions_and_no_inline_code(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/")).text

    assert '<div id="anuncio" class="regiao-viva" role="status" aria-atomic="true"></div>' in page
    assert re.search(r'<div id="alerta"[^>]* role="alert"[^>]*></div>', page)
    assert '<html lang="pt-BR">' in page
    # Everything runs under a CSP without unsafe-inline: no inline script, style or handler.
    assert not re.search(r"<script(?![^>]*\bsrc=)", page)
    assert "<style" not in page and " style=" not in page and " onclick=" not in page
    assert 'http-equiv="refresh"' not in page
    assert '"allowEval":false' in page and '"includeIndicatorStyles":false' in page


async def test_the_vendored_scripts_match_their_checksums_and_integrity_attributes(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/")).text
    for line in (VENDOR / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        content = (VENDOR / name).read_bytes()
        assert hashlib.sha256(content).hexdigest() == digest, name
        sri = "sha384-" + base64.b64encode(hashlib.sha384(content).digest()).decode()
        assert f'src="/static/vendor/{name}" integrity="{sri}"' in page, name


async def test_the_page_resumes_its_stream_from_the_newest_event_it_shows(
    client: httpx.AsyncClient, db: Database
) -> None:
    created = await post_invite(client, "ana@exemplo.com")
    invite = await invite_row(db, created["id"])
    assert invite is not None
    newest = await queries.last_event_id(db, invite.sender_id)

    page = (await client.get("/")).text

    assert f'sse-connect="/convites/eventos?depois={newest}"' in page
    assert f'data-evento="{newest}"' in page


async def test_an_htmx_validation_error_replaces_the_form_with_its_messages(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/convites",
        data={"email": "nao-e-email"},
        headers={**HTMX, "X-CSRF-Token": await csrf_token(client)},
    )

    assert response.status_code == 422
    assert response.headers["HX-Retarget"] == "#form-convite"
    assert response.headers["HX-Reswap"] == "outerHTML"
    assert 'data-estado="erro"' in response.text and 'aria-invalid="true"' in response.text


async def test_an_htmx_send_answers_the_row_and_a_clean_form(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/convites",
        data={"email": "bia@exemplo.com"},
        headers={**HTMX, "X-CSRF-Token": await csrf_token(client)},
    )

    assert response.status_code == 202
    assert 'data-anuncio="Recebemos, enviando… (convite para bia@exemplo.com)"' in response.text
    assert 'data-anuncio-em="status"' in response.text
    assert 'hx-swap-oob="true" data-estado="limpo"' in response.text
    assert 'value=""' in response.text


async def test_a_pending_row_says_when_to_check_again_for_slowness(
    client: httpx.AsyncClient,
) -> None:
    created = await post_invite(client, "caio@exemplo.com")

    row = (await client.get(f"/convites/{created['id']}", headers=HTMX)).text

    slow_in = float(re.search(r'data-lento-em="([0-9.]+)"', row).group(1))  # type: ignore[union-attr]
    assert 0 < slow_in <= 30


async def test_an_uncertain_row_asks_for_confirmation_before_resending(
    client: httpx.AsyncClient, db: Database
) -> None:
    created = await post_invite(client, "duda@exemplo.com")
    claimed = await transitions.claim_with_link(db, created["id"], 1, lease_seconds=60)
    assert claimed is not None
    await transitions.mark_uncertain(db, claimed.change.invite, "Interrompido.")

    row = (await client.get(f"/convites/{created['id']}", headers=HTMX)).text

    details = re.search(r"<details.*?</details>", row, re.S)
    assert details, row
    assert "<summary" in details.group(0) and "Sim, reenviar para duda@exemplo.com" in row
    assert 'data-anuncio-em="alert"' in row
    assert "Não conseguimos confirmar o envio" in row


async def test_a_sign_in_link_waiting_without_a_worker_reads_pausado_in_its_own_words(
    anonymous_client: httpx.AsyncClient,
) -> None:
    token = page_token((await anonymous_client.get("/entrar")).text)
    asked = await anonymous_client.post(
        "/entrar", data={"email": "ana@exemplo.com", "csrf_token": token}
    )
    assert asked.status_code in (202, 303), asked.text

    page = (await anonymous_client.get("/entrar")).text

    assert '<body data-envio="pausado"' in page
    assert "Nada do que você pediu se perde" in page and "convites" not in notice_of(page)
    assert re.search(r'quando-pausado">\s*<span class="selo">Pausado</span>', page)
    assert "Recebemos o pedido do link para ana@exemplo.com. O envio está pausado" in page
    assert 'data-anuncio-pausado="Recebemos o pedido do link' in page


def notice_of(page: str) -> str:
    found = re.search(r'<p id="aviso-envio".*?</p>', page, re.S)
    assert found, page
    return found.group(0)


async def test_a_pendente_row_reads_pausado_without_a_worker_and_still_sending_once_slow(
    client: httpx.AsyncClient, settings: Settings, redis: Redis, clock: MovableClock
) -> None:
    public_id = (await post_invite(client, "ana@exemplo.com"))["id"]

    paused = (await client.get("/")).text
    # No worker heartbeat: the page opens paused, and the row and summary say so (app.css
    # shows the "quando-pausado" words under body[data-envio]).
    assert '<body data-envio="pausado"' in paused
    assert re.search(r'quando-pausado">\s*<span class="selo">Pausado</span>', paused)
    assert re.search(r'<li class="quando-pausado">1 pausado</li>', paused)

    clock.advance(settings.slow_after_seconds + 1)
    await beat(redis, WORKERS, "trabalhador-1")  # a worker is alive, but this row still waits
    running = (await client.get("/")).text
    row = (await client.get(f"/convites/{public_id}", headers={"HX-Request": "true"})).text

    assert "<body hx-headers" in running  # no data-envio: sending runs
    assert re.search(r'quando-envia">\s*<span class="selo">Ainda enviando</span>', row)


async def test_every_page_names_its_icon_so_the_browser_asks_for_no_missing_favicon(
    anonymous_client: httpx.AsyncClient,
) -> None:
    page = (await anonymous_client.get("/entrar")).text
    found = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page)
    assert found, page
    icon = await anonymous_client.get(found.group(1))
    assert icon.status_code == 200 and icon.text.startswith("<svg")
