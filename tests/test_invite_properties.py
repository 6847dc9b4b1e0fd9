"""Property: whatever body arrives at POST /convites, no 5xx, and every stored row is valid."""

from __future__ import annotations

import json
import string
import unicodedata
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import pytest
from email_validator import validate_email
from hypothesis import HealthCheck, event, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import select

from app.config import Settings
from app.invites.validation import MAX_NAME_LENGTH
from app.storage.database import Database
from app.storage.tables import invites
from tests.helpers import JSON, client_for, csrf_token
from tests.services import ScriptedSmtp

BOUNDED = hypothesis_settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

emails = st.one_of(
    st.emails(),
    st.text(max_size=300),
    st.builds(
        "{}@{}".format,
        st.text(string.ascii_letters + '._+-\r\n"<>', max_size=30),
        st.text(max_size=30),
    ),
)
printable = st.characters(categories=["L", "N", "P", "S", "Zs"])
names = st.one_of(
    st.none(),
    st.text(max_size=150),
    st.text(printable, min_size=95, max_size=110),  # around the length limit
    st.sampled_from(
        ["<script>x</script>", "\r\n", "Ana\r\nBcc: x@exemplo.com", "Ana\x00", "\x1b[31m"]
    ),
)
# Addresses that pass, with any name: the rows the property is about.
plausible = st.fixed_dictionaries({"email": st.emails()}, optional={"nome": names})
json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
json_objects = st.one_of(
    plausible,
    st.fixed_dictionaries({"email": emails}, optional={"nome": names, "extra": json_values}),
    st.fixed_dictionaries({"email": json_values, "nome": json_values}),
    json_values,
)
json_bodies = st.one_of(json_objects.map(lambda v: json.dumps(v).encode()), st.binary(max_size=300))
form_bodies = st.one_of(
    plausible.map(lambda fields: {k: v or "" for k, v in fields.items()}),
    st.fixed_dictionaries({"email": emails}, optional={"nome": names.map(lambda n: n or "")}),
    st.dictionaries(st.text(max_size=10), st.text(max_size=50), max_size=5),
)


async def _check_rows(db: Database) -> None:
    async with db.read() as conn:
        rows = (await conn.execute(select(invites.c.email, invites.c.name))).all()
    for email, name in rows:
        checked = validate_email(email, check_deliverability=False, allow_smtputf8=False)
        assert email == f"{checked.local_part}@{checked.ascii_domain.lower()}"
        assert name is None or (
            0 < len(name) <= MAX_NAME_LENGTH
            and not any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in name)
        )


@dataclass
class Api:
    http: httpx.AsyncClient
    token: str


@pytest.fixture
async def api(settings: Settings, smtp: ScriptedSmtp) -> AsyncIterator[Api]:
    """One signed-in browser for every example, with limits no property run can reach."""
    unlimited = replace(
        settings,
        sends_per_sender_per_minute=10**6,
        sends_per_address_per_minute=10**6,
        sends_per_sender_per_day=10**6,
        invites_per_recipient_per_day=10**6,
    )
    async with client_for(unlimited, smtp=smtp) as http:
        yield Api(http, await csrf_token(http))


@BOUNDED
@given(body=json_bodies)
async def test_arbitrary_json_bodies_never_cause_a_5xx_or_a_bad_row(
    api: Api, db: Database, body: bytes
) -> None:
    headers = {**JSON, "Content-Type": "application/json", "X-CSRF-Token": api.token}
    response = await api.http.post("/convites", content=body, headers=headers)
    event(f"status {response.status_code}")

    # 409: an address this sender already invited (the examples repeat addresses).
    assert response.status_code in (202, 400, 409, 422), response.text
    await _check_rows(db)


@BOUNDED
@given(fields=form_bodies, raw=st.none() | st.binary(max_size=200))
async def test_arbitrary_form_bodies_never_cause_a_5xx_or_a_bad_row(
    api: Api, db: Database, fields: dict[str, Any], raw: bytes | None
) -> None:
    form = {**fields, "csrf_token": api.token}
    body = str(httpx.QueryParams(form)).encode() + (b"&" + raw if raw is not None else b"")

    response = await api.http.post(
        "/convites", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    event(f"status {response.status_code}")

    assert response.status_code in (303, 409, 422), response.text
    await _check_rows(db)
