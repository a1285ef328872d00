"""The status report as an HTML page (Jinja2, autoescaped: connector names, table names
and error messages come from files and are never trusted as markup)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from tidemark_airflow.status_page.report import REFUSED_SHOWN

TEMPLATES = Path(__file__).parent / "templates"
REFRESH_SECONDS = 15
MISSING = "\N{EN DASH}"  # an empty cell


@cache
def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))
    env.filters["compact"] = _compact
    env.filters["number"] = lambda v: MISSING if v is None else f"{v:,}"
    env.filters["seconds"] = lambda v: MISSING if v is None else f"{v:.1f} s"
    return env


def render(report: dict[str, Any]) -> str:
    """The page for a `status_report()` document."""
    return (
        _environment()
        .get_template("status.html")
        .render(report=report, refresh=REFRESH_SECONDS, refused_shown=REFUSED_SHOWN)
    )


def render_refused(connector: dict[str, Any]) -> str:
    """One connector's refused signals, all of those kept, with their reasons (a report
    entry of `status_report()`; the main page shows the newest few and links here)."""
    return _environment().get_template("refused.html").render(c=connector)


def _compact(value: Any, width: int = 140) -> str:
    """A value on one line, cut to `width` characters (commit metadata can be long)."""
    if value is None:
        return MISSING
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 1] + "\N{HORIZONTAL ELLIPSIS}"
