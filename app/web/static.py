"""``/static``: long cache for files whose URL changes when their content does.

Versioned names and ``static_url``'s ``?v=<hash>`` are cached for a year; anything else is
revalidated on every use, so a deploy is never hidden.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from starlette.datastructures import QueryParams
from starlette.responses import Response
from starlette.staticfiles import PathLike, StaticFiles
from starlette.types import Scope

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
VENDOR = "vendor/"


def asset_versions(directory: Path) -> dict[str, str]:
    """``{"app.css": "<12 hex>"}`` for every non-vendor file under ``directory``."""
    versions = {}
    for path in sorted(directory.rglob("*")):
        name = path.relative_to(directory).as_posix()
        if path.is_file() and not name.startswith(VENDOR):
            versions[name] = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return versions


class StaticAssets(StaticFiles):
    """Starlette's static files with the cache policy above."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory=str(directory))
        self.versions = asset_versions(directory)

    def url_for(self, name: str) -> str:
        """The URL of ``name`` with its content version (for templates: ``static_url``)."""
        version = self.versions.get(name)
        return f"/static/{name}?v={version}" if version else f"/static/{name}"

    def file_response(
        self, full_path: PathLike, stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        name = Path(self.get_path(scope)).as_posix()
        current = QueryParams(scope.get("query_string", b"")).get("v")
        versioned = name.startswith(VENDOR) or (
            current is not None and current == self.versions.get(name)
        )
        response.headers["Cache-Control"] = IMMUTABLE if versioned else REVALIDATE
        return response
