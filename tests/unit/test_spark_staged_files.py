"""The Spark chunk job maps each staged file to its window by Spark's partition number."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_core.errors import TidemarkError
from spark_jobs.snapshot_jvm_batches import staged_files


def part(folder, number, rows, job="0b1c"):
    path = folder / f"part-{number:05d}-{job}-c000.snappy.parquet"
    pq.write_table(pa.table({"id": list(range(rows))}), path)
    return str(path)


def test_each_partition_file_is_its_window_with_the_footer_row_count(tmp_path):
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / ".part-00000-0b1c-c000.snappy.parquet.crc").write_text("")
    first, third = part(tmp_path, 0, 3), part(tmp_path, 2, 5)
    assert staged_files(str(tmp_path)) == {0: (first, 3), 2: (third, 5)}


def test_a_second_file_for_one_partition_is_an_error_not_a_guess(tmp_path):
    part(tmp_path, 1, 2, job="aaaa")
    part(tmp_path, 1, 2, job="bbbb")
    with pytest.raises(TidemarkError, match="unexpected file"):
        staged_files(str(tmp_path))


def test_a_file_spark_did_not_name_is_an_error(tmp_path):
    pq.write_table(pa.table({"id": [1]}), tmp_path / "window-1.parquet")
    with pytest.raises(TidemarkError, match="window-1.parquet"):
        staged_files(str(tmp_path))
