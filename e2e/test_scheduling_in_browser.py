"""Scheduling an invite in Chromium: "Enviar em" on the form, what a screen reader hears (the
scheduled moment, once), and axe on the page with a scheduled row and a refused moment, on the
form and through "Mudar horário"."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from app.clock import DISPLAY_TZ, utcnow
from e2e.conftest import Stack
from e2e.spoken import assertive, polite, spoken, wait_for_spoken

pytestmark = pytest.mark.e2e

WHEN_FIELD = "Enviar em (opcional)"


def open_home(page: Page) -> None:
    page.goto("/")
    page.wait_for_function("window.htmx !== undefined")


def assert_no_axe_violations(page: Page, state: str) -> None:
    results = Axe().run(page)
    assert results.violations_count == 0, f"{state}:\n{results.generate_report()}"


def schedule_in_two_days(page: Page, email: str) -> str:
    """Sends the form with "Enviar em" two days ahead at 9h00; what is heard once it is written."""
    open_home(page)
    local = (utcnow() + timedelta(days=2)).astimezone(DISPLAY_TZ)
    scheduled = f"Agendado para {local:%d/%m} às 9h00 (convite para {email})."
    page.get_by_label(WHEN_FIELD).fill(f"{local:%Y-%m-%d}T09:00")
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("E-mail").press("Enter")
    wait_for_spoken(page, polite(scheduled))
    return scheduled


def test_a_scheduled_invite_is_announced_once_with_its_moment(page: Page, stack: Stack) -> None:
    email = "ana@exemplo.com"
    scheduled = schedule_in_two_days(page, email)

    row = page.locator("li.convite", has_text=email)
    expect(row).to_have_attribute("data-status", "agendado")
    expect(page.get_by_label(WHEN_FIELD)).to_have_value("")  # the clean form
    expect(page.locator("#resumo-convites")).to_contain_text("1 agendado")
    assert_no_axe_violations(page, "scheduled row")

    # Cancelled before its moment: the stream, which carries the scheduling's event too, says
    # only what is new (its events come in order, so the cancel's is heard after it).
    row.get_by_text("Cancelar convite").click()
    row.get_by_role("button", name=f"Sim, cancelar o convite para {email}").click()
    cancelled = f"Convite para {email} cancelado."
    wait_for_spoken(page, polite(cancelled))
    assert [p for p in spoken(page) if p.startswith(("polite", "assertive"))] == [
        polite(scheduled),
        polite(cancelled),
    ]


def test_a_moment_already_past_is_said_by_the_field_and_nothing_is_written(
    page: Page, stack: Stack
) -> None:
    open_home(page)
    past = (utcnow() - timedelta(days=1)).astimezone(DISPLAY_TZ)

    page.get_by_label(WHEN_FIELD).fill(f"{past:%Y-%m-%d}T09:00")
    page.get_by_label("E-mail").fill("bia@exemplo.com")
    page.get_by_label("E-mail").press("Enter")

    said = "Esse momento já passou. Escolha uma data e hora no futuro."
    wait_for_spoken(page, assertive(said))
    expect(page.get_by_label(WHEN_FIELD)).to_have_attribute("aria-invalid", "true")
    expect(page.locator("li.convite")).to_have_count(0)
    assert_no_axe_violations(page, "refused moment")


def test_lembrar_is_heard_when_asked_and_once_when_sent(page: Page, stack: Stack) -> None:
    open_home(page)
    email = "caio@exemplo.com"
    page.get_by_label("E-mail").fill(email)
    page.get_by_label("E-mail").press("Enter")
    wait_for_spoken(page, polite(f"Convite para {email} enviado."))
    row = page.locator("li.convite", has_text=email)

    row.get_by_role("button", name=f"Lembrar {email} do convite").click()

    wait_for_spoken(page, polite(f"Lembrete pedido para {email}."))
    # The worker's reminder pass runs every ten seconds; its event reaches the page's stream.
    sent_prefix = polite(f"Lembrete enviado para {email} às ")
    page.wait_for_function(
        "p => window.__ouvinte.heard().some(h => h.startsWith(p))", arg=sent_prefix, timeout=30_000
    )
    said = [p for p in spoken(page) if p.startswith(("polite", "assertive"))]
    assert said[:3] == [
        polite(f"Recebemos, enviando… (convite para {email})"),
        polite(f"Convite para {email} enviado."),
        polite(f"Lembrete pedido para {email}."),
    ]
    assert len(said) == 4 and re.fullmatch(re.escape(sent_prefix) + r"\d{1,2}h\d{2}\.", said[3])
    expect(row.get_by_role("button", name=f"Lembrar {email} do convite")).to_have_count(0)
    assert_no_axe_violations(page, "reminded row")


def test_mudar_horario_to_a_past_moment_is_said_once_next_to_the_field_in_the_open_panel(
    page: Page, stack: Stack
) -> None:
    email = "duda@exemplo.com"
    scheduled = schedule_in_two_days(page, email)
    row = page.locator("li.convite", has_text=email)
    past = (utcnow() - timedelta(days=1)).astimezone(DISPLAY_TZ)

    row.get_by_text("Mudar horário").click()
    row.get_by_label("Novo horário (Brasília)").fill(f"{past:%Y-%m-%d}T09:00")
    row.get_by_role("button", name="Agendar para o novo horário").click()

    said = "Esse momento já passou. Escolha uma data e hora no futuro."
    wait_for_spoken(page, assertive(said))
    field = row.get_by_label("Novo horário (Brasília)")
    expect(field).to_be_focused()
    expect(field).to_have_value(f"{past:%Y-%m-%d}T09:00")  # what was typed, not the old moment
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_accessible_description(said)
    expect(row.locator("details.reagendar")).to_have_attribute("open", "")
    expect(row).to_have_attribute("data-status", "agendado")
    typed = f"Novo horário (Brasília), {past:%Y-%m-%d}T09:00"
    assert spoken(page)[2:] == [
        polite(scheduled),
        f"Mudar horário do convite para {email}",
        typed,
        "button, Agendar para o novo horário",
        f"{typed}, {said}",  # the row came back: focus on the field, read with its error
        assertive(said),  # once
    ]
    assert_no_axe_violations(page, "refused new moment")


def test_mudar_horario_done_leaves_focus_on_the_row(page: Page, stack: Stack) -> None:
    """The panel closes with the new moment: focus goes to the row's link, not to the page
    (the pressed button is in the closed panel, where focusing it does nothing)."""
    email = "eva@exemplo.com"
    schedule_in_two_days(page, email)
    row = page.locator("li.convite", has_text=email)
    later = (utcnow() + timedelta(days=3)).astimezone(DISPLAY_TZ)

    row.get_by_text("Mudar horário").click()
    row.get_by_label("Novo horário (Brasília)").fill(f"{later:%Y-%m-%d}T10:00")
    row.get_by_role("button", name="Agendar para o novo horário").click()

    moved = f"Agendado para {later:%d/%m} às 10h00 (convite para {email})."
    wait_for_spoken(page, polite(moved))
    expect(row.get_by_role("link", name=email)).to_be_focused()
    expect(row.locator("details.reagendar")).not_to_have_attribute("open", "")
    assert spoken(page).count(polite(moved)) == 1
