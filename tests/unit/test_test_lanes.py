"""`make test`'s lanes (scripts/test_lanes.py): one exit code that fails CI whenever a lane
failed, pytest's "no tests collected" only when no lane ran a test, and each failure said
again at the end of the run."""

from __future__ import annotations

import pytest

from scripts.test_lanes import NOTHING_COLLECTED, combined, failure_digest


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


def test_the_digest_repeats_each_failure_with_its_assertion_and_nothing_that_passed(pytester):
    pytester.makepyfile(
        test_mixed=(
            "import pytest\n\n"
            "def test_passes(): assert True\n\n"
            "def test_fails_late():\n    print('x' * 5000)\n    assert 1 + 1 == 3, 'arithmetic broke'\n\n"
            "@pytest.fixture\ndef broken(): raise RuntimeError('fixture broke')\n\n"
            "def test_errors(broken): pass\n\n"
            f"def test_{'named_at_length' * 8}(): assert False, 'long name'\n"
        )
    )
    output = "\n".join(pytester.runpytest("-ra", "-p", "no:cacheprovider").outlines)
    digest = failure_digest(output, per_failure=1500)
    assert "--- test_fails_late" in digest
    assert "E       AssertionError: arithmetic broke" in digest  # the traceback's end, before its output
    assert "--- ERROR at setup of test_errors" in digest and "fixture broke" in digest
    assert "FAILED test_mixed.py::test_fails_late" in digest
    assert "ERROR test_mixed.py::test_errors" in digest
    assert f"--- test_{'named_at_length' * 8}" in digest  # a heading with one `_` a side
    assert "test_passes" not in digest
    assert "x" * 400 in digest and "x" * 600 not in digest  # a third of the limit for what it printed
    assert failure_digest("\n".join(pytester.runpytest("-k", "passes").outlines)) == ""
