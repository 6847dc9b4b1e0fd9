"""Alarms: one log line when a threshold is crossed, one when it clears, nothing in between."""

from __future__ import annotations

import logging

import pytest

from app.ops.alarms import Alarms
from app.ops.health import DatabaseFacts, Health, Problem, RedisFacts

NO_WORKER = Problem("no_live_worker", "Nenhum worker ativo e há convites esperando envio.")
STALE = Problem(
    "pending_too_old", "O convite pendente mais antigo espera há 400 s.", logging.WARNING
)


def health(*problems: Problem) -> Health:
    return Health(DatabaseFacts(), None, RedisFacts(), None, list(problems))


def alarm_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    return [
        (record.levelname, record.__dict__["alarm"], record.__dict__["alarm_state"])
        for record in caplog.records
        if record.name == "app.ops.alarms"
    ]


def test_an_alarm_is_logged_once_when_raised_and_once_when_cleared(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="app.ops.alarms")
    alarms = Alarms()

    for state in (health(), health(NO_WORKER), health(NO_WORKER), health(NO_WORKER, STALE)):
        alarms.evaluate(state)
    alarms.evaluate(health(STALE))
    alarms.evaluate(health())
    alarms.evaluate(health())

    assert alarm_lines(caplog) == [
        ("ERROR", "no_live_worker", "raised"),
        ("WARNING", "pending_too_old", "raised"),
        ("INFO", "no_live_worker", "cleared"),
        ("INFO", "pending_too_old", "cleared"),
    ]
