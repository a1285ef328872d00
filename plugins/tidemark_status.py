"""Airflow plugin: the Tidemark status page in the api-server and a link to it in the UI.

Airflow's plugin loader imports this top-level file (plugins/.airflowignore keeps it out
of the `tidemark_airflow` package, which is imported by name). The page lists every
connector: streamer state, committed position and lag, snapshot progress (windows
done/total per table), refused signals (all of them on `refused/<connector>`) and each
Delta table's last merge; `status.json` has the same as JSON.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from tidemark_airflow.status_page.app import URL_PREFIX, create_app


class TidemarkStatusPlugin(AirflowPlugin):
    name = "tidemark"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Tidemark status"}]
    external_views = [
        {
            "name": "Tidemark",
            # Relative to the UI's base URL, so it also works behind a proxy path.
            "href": f"{URL_PREFIX.lstrip('/')}/",
            "url_route": "tidemark",
            "destination": "nav",
            "nav_top_level": True,
        }
    ]
