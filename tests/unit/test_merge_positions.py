"""Which version of each merged table holds exactly the source transactions up to a position."""

from spark_jobs.merge.positions import common_versions, exact_version


def commit(version, first, last, upto):
    return {"version": version, "first": (0, first), "last": (0, last), "upto": (0, upto)}


def test_a_version_is_exact_when_nothing_after_it_is_at_or_below_the_position():
    commits = [commit(1, 1, 10, 10), commit(2, 11, 20, 20)]
    assert exact_version(commits, (0, 10)) == 1
    assert exact_version(commits, (0, 15)) is None  # version 2 holds 11..20: no cut at 15
    assert exact_version(commits, (0, 20)) == 2
    assert exact_version(commits, (0, 0)) == -1  # before the table's first merge


def test_a_transaction_merged_ahead_of_an_older_held_one_rules_out_positions_between():
    # Batch 1 merged 15 while 12 was held; batch 2 merged 12.
    commits = [commit(1, 15, 15, 11), commit(2, 12, 12, 15)]
    assert exact_version(commits, (0, 13)) is None
    assert exact_version(commits, (0, 11)) == -1
    assert exact_version(commits, (0, 15)) == 2


def test_the_highest_position_every_table_is_exact_at():
    tables = {
        "a": [commit(1, 1, 10, 10), commit(2, 11, 25, 20)],  # merged 25 while 21 was held
        "b": [commit(1, 5, 5, 10), commit(2, 12, 18, 20)],
        "quiet": [commit(1, 2, 2, 10)],
    }
    assert common_versions(tables) == ((0, 10), {"a": 1, "b": 1, "quiet": 1})
    tables["a"].append(commit(3, 21, 21, 25))  # 21 arrives: everything up to 25 is in
    assert common_versions(tables) == ((0, 25), {"a": 3, "b": 2, "quiet": 1})
    assert common_versions({"x": [commit(1, 5, 15, 11)]}) is None  # 5 and 15 merged while 12 was held
