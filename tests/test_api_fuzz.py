"""Bad input against the OpenAPI document: schemathesis generates, for every operation of
app/api/openapi.json, requests that break its schemas (wrong types, missing or extra fields,
bad path and query values) and sends them with a valid key to a real uvicorn. Every answer is a
status the document names for that operation, never a 500, and every refusal is JSON
``{"erro": …}``. Bounded and derandomized: the same requests on every run."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from app.config import Settings
from tests.api_keys import bearer, new_key
from tests.fixtures import ROOT, drain, process_env
from tests.services import AppProcess, ScriptedSmtp, free_port, wait_for_port
from tests.signing_in import sign_in

SPEC = json.loads((ROOT / "app" / "api" / "openapi.json").read_text())
#: Requests per operation and generation mode: enough to reach every kind of refusal the
#: schemas allow, few enough to keep the run short.
EXAMPLES = 25
FUZZ = hypothesis_settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _wrong(operation: Any, status: int, text: str) -> str | None:
    """What is wrong with this answer, if anything."""
    if status >= 500 and status != 503:
        return "a server error"
    if str(status) not in operation.definition.raw["responses"]:
        return "a status the document does not name"
    if status >= 400:
        try:
            body = json.loads(text)
        except ValueError:
            return "a refusal that is not JSON"
        if not (isinstance(body, dict) and isinstance(body.get("erro"), str)):
            return 'a refusal without {"erro": …}'
    return None


def _fuzz(
    operation: Any, mode: GenerationMode, base: str, key: str, problems: dict[str, str]
) -> int:
    """Send ``EXAMPLES`` generated requests of ``operation``; how many were sent. Every wrong
    answer is noted in ``problems`` (one example per kind), not raised: one run shows them all,
    with no time spent shrinking."""
    sent = 0

    @FUZZ
    @given(operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        nonlocal sent
        response = case.call(base_url=base, headers=bearer(key), timeout=30)
        sent += 1
        wrong = _wrong(operation, response.status_code, response.text)
        if wrong is not None:
            kind = f"{operation.label} -> {response.status_code}: {wrong}"
            problems.setdefault(kind, f"{case.formatted_path} {response.text[:200]}")

    # Unsatisfiable: nothing of this operation can be broken in this mode (no parameters).
    with contextlib.suppress(Unsatisfiable):
        run()
    return sent


async def test_bad_input_gets_a_documented_json_refusal_never_a_500(
    settings: Settings, smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    schema = schemathesis.openapi.from_dict(SPEC)
    port = free_port()
    env = process_env(settings, ALLOWED_HOSTS="127.0.0.1")
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base) as browser:
            await sign_in(browser, smtp, "fuzz@exemplo.com", lambda: drain(settings))
            key = await new_key(browser)
        sent, problems = 0, {}
        for result in schema.get_all_operations():
            operation = result.ok()
            for mode in (GenerationMode.NEGATIVE, GenerationMode.POSITIVE):
                sent += _fuzz(operation, mode, base, key, problems)
    assert problems == {}
    assert sent > EXAMPLES * 10
