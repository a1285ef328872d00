"""The conformance suite runs once per registered source fixture (tests/conformance/fixtures)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from tests.conformance.fixtures import SOURCES
from tests.conformance.source_fixture import SourceFixture


@pytest.fixture(scope="session", params=SOURCES)
def source(request: pytest.FixtureRequest) -> Iterator[SourceFixture]:
    """One source, started once for the session by its fixture module."""
    fixture = importlib.import_module(f"tests.conformance.fixtures.{request.param}").FIXTURE(request)
    yield fixture
    fixture.close()


@pytest.fixture
def ns(source: SourceFixture) -> Iterator[str]:
    with source.namespace() as name:
        yield name
