"""The FastAPI app the Tidemark plugin mounts in Airflow's api-server: the status page
(HTML) and the same report as JSON.

Airflow does not authenticate a plugin's app (a mounted app inherits none of the core
API's dependencies), so this one requires, on every route, a signed-in user allowed to
read DAGs: the UI's session cookie or an API token (`Authorization: Bearer`). A browser
without a session is sent to Airflow's login page and back.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Request, status
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from tidemark_airflow.status_page.html import render, render_refused
from tidemark_airflow.status_page.report import connector_refusals, status_report

URL_PREFIX = "/tidemark"


def create_app() -> FastAPI:
    app = FastAPI(
        title="Tidemark status",
        dependencies=[Depends(requires_access_dag("GET"))],
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return render(status_report())

    @app.get("/status.json")
    def report() -> dict[str, Any]:
        return status_report()

    @app.get("/refused/{connector}", response_class=HTMLResponse)
    def refused(connector: str) -> str:
        """Every refused signal a connector keeps, with its reason (linked from the page)."""
        entry = connector_refusals(connector)
        if entry is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"no connector named {connector!r}")
        return render_refused(entry)

    @app.exception_handler(HTTPException)
    async def to_login(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == status.HTTP_401_UNAUTHORIZED and "text/html" in request.headers.get(
            "accept", ""
        ):
            login = get_auth_manager().get_url_login(next_url=str(request.url))
            return RedirectResponse(login, status_code=status.HTTP_303_SEE_OTHER)
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    return app
