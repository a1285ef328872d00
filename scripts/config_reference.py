"""Print (or check) the README's configuration reference, generated from the property
declarations so the documentation cannot drift from what the code accepts.

    python -m scripts.config_reference          print the markdown table
    python -m scripts.config_reference --write  replace the table in README.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cdc_core.config.common import COMMON_PROPERTIES
from cdc_core.config.orchestration import ORCHESTRATION_PROPERTIES
from cdc_core.config.properties import Property
from cdc_core.config.status_properties import STATUS_PROPERTIES
from cdc_core.connectors.registry import all_connectors, class_names

README = Path(__file__).resolve().parent.parent / "README.md"
START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"


def _default(prop: Property, required: str = "`required`") -> str:
    if prop.required:
        return required
    if prop.default is None or prop.default == []:
        return ""
    if isinstance(prop.default, bool):
        return f"`{str(prop.default).lower()}`"
    if isinstance(prop.default, list):
        return f"`{','.join(prop.default)}`"
    return f"`{prop.default}`"


def _required_by(prop: Property) -> str:
    """`required`, or which connectors require a common property that some connector
    declares otherwise (MongoDB needs no `database.hostname`): validation takes a
    connector's own declaration first, and so does this."""
    requiring = []
    for connector in all_connectors():
        own = next((p for p in connector.properties if p.name == prop.name and p.pattern is None), prop)
        if own.required:
            requiring.append(connector.title)
    if len(requiring) == len(all_connectors()):
        return "`required`"
    return f"`required` by {', '.join(requiring)}" if requiring else ""


def _connector_names() -> str:
    """The `connector.class` values, from the registry, per connector."""
    return "; ".join(
        f"{connector.title}: {', '.join(f'`{n}`' for n in names)}" for connector, names in class_names()
    )


# Text the registry gives a property's meaning, so the reference lists what is registered.
_GENERATED = {"connector.class": _connector_names}


def table() -> str:
    lines = []
    sections = [
        ("Common", COMMON_PROPERTIES + STATUS_PROPERTIES, True),
        *((f"{c.title} connector", c.properties, False) for c in all_connectors()),
        ("Airflow and lakehouse", ORCHESTRATION_PROPERTIES, False),
    ]
    for title, props, common in sections:
        lines += [f"**{title}**", "", "| property | default | meaning |", "|---|---|---|"]
        for prop in props:
            meaning = prop.description.replace("|", "\\|")
            if prop.name in _GENERATED:
                meaning += f" {_GENERATED[prop.name]()}."
            if prop.choices:
                meaning += f" One of: {', '.join(f'`{c}`' for c in prop.choices)}."
            default = _default(prop, _required_by(prop) if common else "`required`")
            lines.append(f"| `{prop.name}` | {default} | {meaning} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render(readme: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(readme):
        raise SystemExit(f"README.md has no {START} ... {END} markers")
    return pattern.sub(lambda _: f"{START}\n{table()}{END}", readme)


def main(argv: list[str]) -> int:
    if "--write" in argv:
        README.write_text(render(README.read_text()))
        return 0
    sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
