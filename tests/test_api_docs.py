"""The API's description and its page of docs are true: the OpenAPI document is valid 3.1 and
names every /api/v1 route (and no other), real answers match its schemas, and every curl
example of docs/api.md runs against a real uvicorn."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate
from starlette.routing import Route

from app.config import Settings
from app.invites.status import Status
from app.web.routes import routes
from app.web.static import StaticAssets
from tests.api_keys import bearer, new_key
from tests.fixtures import ROOT, drain, process_env
from tests.services import AppProcess, ScriptedSmtp, free_port, wait_for_port
from tests.signing_in import sign_in

SPEC = json.loads((ROOT / "app" / "api" / "openapi.json").read_text())
EXAMPLES = re.compile(r"```sh\n(.*?)```", re.S)


def test_the_openapi_document_is_valid_and_names_every_api_route(settings: Settings) -> None:
    validate(SPEC)
    assert SPEC["openapi"].startswith("3.1")
    served = {
        (route.path, method.lower())
        for route in routes(settings, StaticAssets(ROOT / "static"))
        if isinstance(route, Route) and route.path.startswith("/api/v1")
        for method in route.methods or ()
        if method != "HEAD"
    }
    described = {(path, method) for path, item in SPEC["paths"].items() for method in item}
    assert served == described


def test_every_event_a_webhook_can_carry_is_documented() -> None:
    """A delivery's ``type`` is ``convite.`` and the invite's new status: any status, ``agendado``
    too (a receiver that validates against the document must not refuse one)."""
    carried = {f"convite.{status.value}" for status in Status}
    schema = SPEC["components"]["schemas"]["EventoConvite"]["properties"]["type"]
    assert set(schema["enum"]) == carried
    docs = (ROOT / "docs" / "api.md").read_text()
    assert all(f"`{kind}`" in docs for kind in carried)


def _answers(output: str) -> list[dict[str, Any]]:
    """The JSON answers curl printed one after another (with no line between them)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while at < len(output.rstrip()):
        answer, at = decoder.raw_decode(output, at)
        found.append(answer)
    assert found, "curl printed no answer"
    return found


def _matches(instance: Any, schema_name: str) -> None:
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": SPEC["components"]}
    OAS31Validator(schema).validate(instance)


async def test_real_answers_match_the_documents_schemas(
    client: httpx.AsyncClient, anonymous_client: httpx.AsyncClient
) -> None:
    key = await new_key(client)
    api = anonymous_client
    served = await api.get("/api/v1/openapi.json")
    assert served.status_code == 200 and served.json() == SPEC
    sent = await api.post(
        "/api/v1/convites", json={"email": "ana@exemplo.com"}, headers=bearer(key)
    )
    _matches(sent.json(), "Convite")
    listed = await api.get("/api/v1/convites", headers=bearer(key))
    for row in listed.json()["convites"]:
        _matches(row, "Convite")
    for refused in (
        await api.post("/api/v1/convites", json={"email": "x"}, headers=bearer(key)),
        await api.post("/api/v1/convites", json={"email": "ana@exemplo.com"}, headers=bearer(key)),
        await api.get("/api/v1/convites/nada", headers=bearer(key)),
        await api.get("/api/v1/convites"),
    ):
        documented = SPEC["paths"]["/api/v1/convites"]["post"]["responses"]
        assert str(refused.status_code) in documented or refused.status_code == 404
        _matches(refused.json(), "Erro")
    review = await api.post(
        "/api/v1/lotes/revisar", json={"enderecos": "a@exemplo.com\nnada"}, headers=bearer(key)
    )
    _matches(review.json(), "Revisao")


async def test_the_curl_examples_of_the_docs_run_against_a_real_server(
    settings: Settings, smtp: ScriptedSmtp, tmp_path: Path
) -> None:
    blocks = EXAMPLES.findall((ROOT / "docs" / "api.md").read_text())
    assert len(blocks) >= 5
    port = free_port()
    env = process_env(settings, ALLOWED_HOSTS="127.0.0.1")
    with AppProcess.web(env, tmp_path / "web.log", port):
        wait_for_port(port)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base) as browser:
            await sign_in(browser, smtp, "docs@exemplo.com", lambda: drain(settings))
            key = await new_key(browser)
        shell = {**os.environ, "CONVITES": base, "CHAVE": key, "ID": ""}
        for block in blocks:
            ran = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", block],
                env=shell,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert ran.returncode == 0, (block, ran.stdout, ran.stderr)
            for answer in _answers(ran.stdout):
                assert answer.get("erro") is None, (block, answer)
                if not shell["ID"]:
                    shell["ID"] = answer["id"]
    assert shell["ID"]
