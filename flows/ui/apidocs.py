"""The API's interactive docs (Swagger UI) at ``/api/v1/docs``, from files on this machine.

Swagger UI comes from the ``swagger-ui-bundle-v2`` package and is served under
``/api/v1/docs/assets/``; the page starts it from ``static/apidocs.js``. Nothing is loaded from
another origin, so the docs work offline and run under the same Content-Security-Policy as
every page (no inline script).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from flows.ui import api
from flows.ui.state import CheckedRoute

DOCS = f"{api.PREFIX}/docs"
ASSETS = f"{DOCS}/assets"

PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>redis-flows API</title>
<link rel="stylesheet" href="{ASSETS}/swagger-ui.css">
<script src="{ASSETS}/swagger-ui-bundle.js" defer></script>
<script src="/static/apidocs.js" defer></script>
</head>
<body>
<div id="swagger-ui" data-openapi="{api.PREFIX}/openapi.json"></div>
</body>
</html>
"""

router = APIRouter(include_in_schema=False, route_class=CheckedRoute)


@router.get(DOCS, response_class=HTMLResponse)
def docs() -> HTMLResponse:
    return HTMLResponse(PAGE)


def mount(app: FastAPI) -> None:
    """The docs page and Swagger UI's files on ``app``."""
    from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

    app.include_router(router)
    app.mount(ASSETS, StaticFiles(directory=Path(str(swagger_ui_path))), name="apidocs")
