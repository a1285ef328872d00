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
