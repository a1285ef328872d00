"""README.md stays true: its configuration reference is the one the code declares."""

from __future__ import annotations

from scripts import config_reference


def test_configuration_reference_matches_the_declared_properties():
    readme = config_reference.README.read_text()
    assert config_reference.render(readme) == readme, "run: python -m scripts.config_reference --write"


def test_readme_shows_the_two_commands_first():
    readme = config_reference.README.read_text()
    first_block = readme.split("```bash", 1)[1].split("```", 1)[0]
    assert "make demo" in first_block and "make test" in first_block


def _reference_row(readme: str, prop: str) -> str:
    common = readme.split("**Common**", 1)[1].split("**", 1)[0]
    return next(line for line in common.splitlines() if line.startswith(f"| `{prop}` |"))


def test_the_reference_names_every_registered_connector_class():
    """It listed `mysql` and `mariadb` only, though Vitess and MongoDB are registered."""
    from cdc_core.connectors.registry import CONNECTORS

    row = _reference_row(config_reference.README.read_text(), "connector.class")
    for name in CONNECTORS:
        assert f"`{name}`" in row, name


def test_the_reference_says_which_connectors_need_a_hostname():
    """It said `database.hostname` was required of every connector; MongoDB's hosts are in
    its connection string, and validation takes the connector's own declaration."""
    readme = config_reference.README.read_text()
    for prop in ("database.hostname", "database.user"):
        default = _reference_row(readme, prop).split("|")[2].strip()
        assert default == "`required` by MySQL/MariaDB, Vitess", default
    mongodb = readme.split("**MongoDB connector**", 1)[1].split("**", 1)[0]
    assert "| `mongodb.connection.string` | `required` |" in mongodb
