"""What a batch says: summaries from the database, throttled, silent rows, and its stream."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from app.batches.progress import Throttle, received_text, summarize
from app.config import Settings
from app.invites.status import Status
from tests.batch_helpers import read_events
from tests.fixtures import MovableClock, drain, process_env
from tests.helpers import JSON, api_headers, post_invite
from tests.services import AppProcess, ScriptedSmtp, free_port, wait_for_port
from tests.signing_in import sign_in


def test_progress_failures_and_the_end_are_summed_up_never_per_row() -> None:
    sending = summarize(120, {Status.ENVIADO: 40, Status.PENDENTE: 77, Status.FALHOU: 3})
    done = summarize(120, {Status.ENVIADO: 118, Status.FALHOU: 2})

    assert (sending.spoken, sending.alert, sending.finished) == (
        "40 de 120 enviados",
        "3 falharam: veja a lista",
        False,
    )
    assert (done.spoken, done.alert, done.finished) == ("118 enviados, 2 falharam.", "", True)
    assert summarize(1, {Status.ENVIADO: 1}).spoken == "1 enviado."
    assert summarize(3, {Status.ENVIADO: 2, Status.INCERTO: 1}).spoken == "2 enviados, 1 incerto."
    assert received_text(120) == "Recebemos 120 convites, enviando…"


def test_every_status_gets_a_counter_and_equal_counts_give_equal_keys() -> None:
    summary = summarize(5, {Status.PENDENTE: 5})

    assert [status for status, _ in summary.counts] == list(Status)
    assert summary.key == summarize(5, {Status.PENDENTE: 5}).key
    assert summary.key != summarize(5, {Status.PENDENTE: 4, Status.ENVIADO: 1}).key
    assert summarize(1, {Status.ENVIADO: 1}).key.startswith("fim:")


def test_the_throttle_lets_one_sentence_through_per_period(clock: MovableClock) -> None:
    throttle = Throttle(0.2)
    assert not throttle.ready()  # the person just heard "Recebemos"
    clock.advance(0.2)
    assert throttle.ready()
    throttle.spoke()
    assert not throttle.ready() and 0 < throttle.wait() <= 0.2


async def test_a_batchs_rows_are_silent_and_set_no_slow_timer_on_the_home_page(
    client: httpx.AsyncClient,
) -> None:
    await client.post(
        "/lotes", json={"enderecos": "a@exemplo.com"}, headers=await api_headers(client)
    )
    await post_invite(client, "so@exemplo.com")

    home = (await client.get("/")).text
    rows = re.findall(r"<li id=\"convite-.*?</li>", home, flags=re.DOTALL)
    batch = next(r for r in rows if ">a@exemplo.com<" in r)
    single = next(r for r in rows if ">so@exemplo.com<" in r)

    assert 'data-anuncio=""' in batch and "data-lento-em" not in batch
    assert 'data-anuncio="Recebemos, enviando… (convite para so@exemplo.com)"' in single
    assert "data-lento-em" in single


@pytest.fixture
def quick_web(settings: Settings, tmp_path: Path) -> Iterator[tuple[str, Settings]]:
    fast = replace(settings, batch_announce_seconds=1.0)
    port = free_port()
    with AppProcess.web(process_env(fast), tmp_path / "web.log", port):
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}", fast


async def test_the_batch_stream_sends_its_rows_and_bounded_summaries_ending_with_one_final(
    quick_web: tuple[str, Settings], smtp: ScriptedSmtp
) -> None:
    url, settings = quick_web
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        await sign_in(http, smtp, "marta@exemplo.com", lambda: drain(settings))
        headers = await api_headers(http)
        sent = await http.post(
            "/lotes",
            json={"enderecos": "\n".join(f"l{n}@exemplo.com" for n in range(6))},
            headers=headers,
        )
        location = sent.headers["location"]
        page = (await http.get(location)).text
        cursor = re.search(r"depois=(\d+)", page).group(1)  # type: ignore[union-attr]
        await post_invite(http, "fora@exemplo.com")  # not in the batch: never on its stream
        rows: list[str] = []
        summaries: list[tuple[float, str]] = []
        began = time.monotonic()
        opened = asyncio.Event()

        async def listen() -> None:
            async with http.stream("GET", f"{location}/eventos?depois={cursor}") as response:
                opened.set()
                async for event in read_events(response):
                    if event.event == "convite":
                        rows.append(event.data)
                    if event.event == "lote":
                        summaries.append((time.monotonic() - began, event.data))
                        if 'data-final="sim"' in event.data:
                            return

        listener = asyncio.create_task(listen())
        await asyncio.wait_for(opened.wait(), 15)
        await drain(settings)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(listener, 15)
        assert (await http.get(location, headers=JSON)).json()["terminado"]

    assert summaries, "no summary came"
    assert 'data-final="sim"' in summaries[-1][1] and "6 enviados." in summaries[-1][1]
    assert sum('data-final="sim"' in data for _, data in summaries) == 1
    moments = [at for at, _ in summaries[:-1]]
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(moments))
    assert rows and not any("fora@exemplo.com" in row for row in rows)
    assert all('data-anuncio=""' in row for row in rows)


async def test_a_finished_batchs_reminders_come_as_a_few_bounded_summaries(
    quick_web: tuple[str, Settings], smtp: ScriptedSmtp, clock: MovableClock
) -> None:
    url, settings = quick_web
    size = 6
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        await sign_in(http, smtp, "marta@exemplo.com", lambda: drain(settings))
        sent = await http.post(
            "/lotes",
            json={"enderecos": "\n".join(f"r{n}@exemplo.com" for n in range(size))},
            headers=await api_headers(http),
        )
        location = sent.headers["location"]
        await drain(settings)
        page = (await http.get(location)).text
        cursor = re.search(r"depois=(\d+)", page).group(1)  # type: ignore[union-attr]
        summaries: list[tuple[float, str]] = []
        began = time.monotonic()
        opened = asyncio.Event()
        everything = f"{size} lembretes enviados"

        async def listen() -> None:
            async with http.stream("GET", f"{location}/eventos?depois={cursor}") as response:
                opened.set()
                async for event in read_events(response):
                    if event.event == "lote":
                        summaries.append((time.monotonic() - began, event.data))
                        if everything in event.data:
                            return

        listener = asyncio.create_task(listen())
        await asyncio.wait_for(opened.wait(), 15)
        smtp.slow(0.3)  # the reminders leave one by one, over several periods
        clock.advance(settings.reminder_after_seconds + 1)
        try:
            await drain(settings)
        finally:
            smtp.slow(0)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(listener, 15)

    assert summaries and everything in summaries[-1][1]
    # The first news of a finished batch is said at once; the rest waits for the throttle.
    moments = [at for at, _ in summaries]
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(moments)), moments
    assert len(summaries) < size
