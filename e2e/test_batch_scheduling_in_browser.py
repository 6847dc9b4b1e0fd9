"""Scheduling a batch in Chromium: "Enviar em" and the occasion on the batch form, kept through
"Corrigir a lista", what a screen reader hears (the moment, once for the whole batch), and axe
on the form with a refused moment, the review and the scheduled batch's page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from app.clock import DISPLAY_TZ, utcnow
from e2e.conftest import Stack
from e2e.spoken import polite, spoken, wait_for_spoken

pytestmark = pytest.mark.e2e

WHEN_FIELD = "Enviar em (opcional)"
TITLE_FIELD = "Título da ocasião"
SIZE = 3


def assert_no_axe_violations(page: Page, state: str) -> None:
    results = Axe().run(page)
    assert results.violations_count == 0, f"{state}:\n{results.generate_report()}"


def test_a_scheduled_batch_is_heard_once_and_its_pages_are_axe_clean(
    page: Page, stack: Stack
) -> None:
    local = (utcnow() + timedelta(days=2)).astimezone(DISPLAY_TZ)
    past = (utcnow() - timedelta(days=1)).astimezone(DISPLAY_TZ)
    page.goto("/lotes/novo")
    page.get_by_label("Endereços", exact=True).fill(
        "\n".join(f"agenda{n}@exemplo.com" for n in range(SIZE))
    )
    page.get_by_label(TITLE_FIELD).fill("Corrida de sábado")
    page.get_by_label(WHEN_FIELD).fill(f"{past:%Y-%m-%d}T09:00")
    page.get_by_role("button", name="Revisar").click()

    # Refused at its field, the error summary first; nothing typed is lost.
    expect(page.get_by_label(WHEN_FIELD)).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("alert", name="Há um problema")).to_contain_text(
        "Esse momento já passou"
    )
    expect(page.get_by_label(TITLE_FIELD)).to_have_value("Corrida de sábado")
    assert_no_axe_violations(page, "refused moment")

    page.get_by_label(WHEN_FIELD).fill(f"{local:%Y-%m-%d}T09:00")
    page.get_by_role("button", name="Revisar").click()
    expect(page.get_by_text(f"Envio agendado para {local:%d/%m} às 9h00")).to_be_visible()
    assert_no_axe_violations(page, "review")
    page.get_by_role("button", name="Corrigir a lista").click()
    expect(page.get_by_label(WHEN_FIELD)).to_have_value(f"{local:%Y-%m-%d}T09:00")
    expect(page.get_by_label(TITLE_FIELD)).to_have_value("Corrida de sábado")
    page.get_by_role("button", name="Revisar").click()

    page.get_by_role("button", name=f"Agendar {SIZE} convites").click()
    page.wait_for_url(re.compile(r"/lotes/[\w-]+\?novo=1$"))

    said = f"Recebemos {SIZE} convites. Agendado para {local:%d/%m} às 9h00."
    wait_for_spoken(page, polite(said))
    expect(page.get_by_role("heading", name="Lote agendado")).to_be_visible()
    expect(page.locator("li.convite[data-status=agendado]")).to_have_count(SIZE)
    assert_no_axe_violations(page, "scheduled batch")
    # Once for the batch: no row and no summary says it again.
    heard = [p for p in spoken(page) if p.startswith(("polite", "assertive"))]
    assert heard == [polite(said)]
    assert sum("Agendado para" in p for p in spoken(page)) == 1
