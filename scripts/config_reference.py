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
from cdc_core.connectors.registry import all_connectors

README = Path(__file__).resolve().parent.parent / "README.md"
START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"


def _default(prop: Property) -> str:
    if prop.required:
        return "required"
    if prop.default is None or prop.default == []:
        return ""
    if isinstance(prop.default, bool):
        return str(prop.default).lower()
    if isinstance(prop.default, list):
        return ",".join(prop.default)
    return str(prop.default)


def table() -> str:
    lines = []
    sections = [
        ("Common", COMMON_PROPERTIES),
        *((f"{c.title} connector", c.properties) for c in all_connectors()),
        ("Airflow and lakehouse", ORCHESTRATION_PROPERTIES),
    ]
    for title, props in sections:
        lines += [f"**{title}**", "", "| property | default | meaning |", "|---|---|---|"]
        for prop in props:
            meaning = prop.description.replace("|", "\\|")
            if prop.choices:
                meaning += f" One of: {', '.join(f'`{c}`' for c in prop.choices)}."
            lines.append(
                f"| `{prop.name}` | {('`' + _default(prop) + '`') if _default(prop) else ''} | {meaning} |"
            )
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
