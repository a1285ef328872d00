"""`make test`'s lanes (scripts/test_lanes.py): one exit code that fails CI whenever a lane
failed, and pytest's "no tests collected" only when no lane ran a test."""

from __future__ import annotations

import pytest

from scripts.test_lanes import NOTHING_COLLECTED, combined


@pytest.mark.parametrize(
    ("codes", "expected"),
    [
        ({"shared": 0, "airflow": 0, "exclusive": 0}, 0),
        # a lane with nothing selected (`make test PYTEST_ARGS=tests/unit`) is not a failure
        ({"shared": 0, "airflow": NOTHING_COLLECTED, "exclusive": NOTHING_COLLECTED}, 0),
        ({"shared": NOTHING_COLLECTED, "airflow": NOTHING_COLLECTED, "exclusive": NOTHING_COLLECTED}, 5),
        ({"shared": 0, "airflow": 1, "exclusive": 0}, 1),
        ({"shared": NOTHING_COLLECTED, "airflow": 0, "exclusive": 2}, 2),
        ({"shared": -15, "airflow": 0, "exclusive": 0}, -15),  # a lane killed by a signal
    ],
)
def test_one_exit_code_for_the_lanes(codes, expected):
    assert combined(codes) == expected


def test_each_test_runs_in_exactly_one_lane(pytester, monkeypatch):
    """The lanes partition the tests: the exclusive ones, those on Airflow's database, the rest."""
    pytester.makeconftest(
        "import pytest\nfrom tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    pytester.makeini("[pytest]\nmarkers =\n    exclusive: alone\n")
    pytester.makepyfile(
        test_airflow_x="def test_a(): pass\n",
        test_other="import pytest\n\ndef test_b(): pass\n\n@pytest.mark.exclusive\ndef test_c(): pass\n",
    )
    seen = {}
    for lane in ("airflow", "shared", "exclusive"):
        monkeypatch.setenv("TIDEMARK_TEST_LANE", lane)
        result = pytester.runpytest("-q", "-p", "no:cacheprovider", "--collect-only")
        seen[lane] = sorted(line.split("::")[-1] for line in result.outlines if "::" in line)
    assert seen == {"airflow": ["test_a"], "shared": ["test_b"], "exclusive": ["test_c"]}
