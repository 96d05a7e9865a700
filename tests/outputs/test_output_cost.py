"""What writing a run's outputs costs: the work ``herdsim run`` skips (CPU, not content),
and the proof that skipping it leaves the files as they were read."""

from __future__ import annotations

import io

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import tiny
from matplotlib.axes import Axes

import herdsim
from herdsim.outputs.compare_dir import save_run
from herdsim.plots.style import save_figure
from herdsim.results.comparison import Comparison


@pytest.fixture(scope="module")
def run() -> herdsim.Result:
    """A closed pool whose downstream goes down for a second: the timeline has its calls
    row and the success, retries, backlog and down panels; a log scale on the landing
    figure; jobs of every outcome: succeeded, dead-lettered, pending at the end."""
    sc = herdsim.load_scenario(tiny(
        duration="5s", workload={"rate": 300}, workers={"count": 40},
        downstream={"outages": [{"start": "1s", "duration": "1s", "mode": "down"}]}))
    return herdsim.run(sc)


@pytest.fixture(scope="module")
def storm(run) -> Comparison:
    return Comparison.from_result(run)


def test_jobs_parquet_reads_back_the_jobs_frame_and_encodes_only_what_repeats(run,
                                                                              tmp_path):
    """pandas reads jobs.parquet back as the run's jobs frame (values, dtypes, categories);
    a dictionary is built for the columns that repeat, none for the times (pyarrow's
    default tries one for each and gives it up), the job ids stored as deltas."""
    save_run(run, tmp_path / "out", formats=())
    path = tmp_path / "out" / "jobs.parquet"
    pd.testing.assert_frame_equal(pd.read_parquet(path), run.jobs)
    assert set(run.jobs["outcome"]) == {"succeeded", "dead_lettered", "pending"}
    columns = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {columns.column(i).path_in_schema: columns.column(i).encodings
                 for i in range(columns.num_columns)}
    dictionary = {name for name, used in encodings.items() if "RLE_DICTIONARY" in used}
    assert dictionary == {"attempts", "outcome"}, encodings
    assert "DELTA_BINARY_PACKED" in encodings["job"]


def png(figure) -> bytes:
    out = io.BytesIO()
    save_figure(figure, out, "png")
    return out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["timeline", "landing"])
def test_titles_are_not_searched_for_a_clear_spot_and_the_picture_is_the_same(
        storm, kind, monkeypatch):
    """matplotlib lifts a title over ticks or an offset text above its axes, measuring
    every y tick label for each title at each layout pass and draw. These figures put
    nothing there: only the timeline's calls rows (titles 3 points above the row, lifted
    clear of it) may search; forcing the search on every axes draws the same bytes."""
    searched: list[Axes] = []
    update = Axes._update_title_position

    def counted(ax, renderer):
        if ax._autotitlepos is not False and any(
                t.get_text() for t in (ax.title, ax._left_title, ax._right_title)):
            searched.append(ax)
        return update(ax, renderer)

    monkeypatch.setattr(Axes, "_update_title_position", counted)
    figure = storm.plot(kind)
    drawn = png(figure)
    rows = [ax for ax in figure.axes if ax.get_title("right").startswith("peak ")]
    assert (kind == "timeline") == bool(rows)  # the calls rows are told apart
    assert set(searched) <= set(rows), [ax.get_title() for ax in set(searched) - set(rows)]
    for ax in figure.axes:
        ax._autotitlepos = True
    assert png(figure) == drawn


def zlib_level(data: bytes) -> int:
    """The compression level class a PNG's first IDAT stream declares (zlib's FLEVEL:
    0 fastest, 1 fast (levels 2-5), 2 default (6), 3 maximum)."""
    at = 8  # after the signature: chunks of length, type, data, CRC
    while data[at + 4:at + 8] != b"IDAT":
        at += 12 + int.from_bytes(data[at:at + 4], "big")
    return data[at + 9] >> 6  # the zlib header's second byte


def test_a_png_is_compressed_fast_and_holds_the_same_pixels(storm):
    """zlib level 3, not matplotlib's 6: a third less CPU for a tenth more bytes, and the
    very pixels the default level stores."""
    from PIL import Image

    figure = storm.plot("landing")
    fast = png(figure)
    default = io.BytesIO()
    figure.savefig(default, format="png")
    assert (zlib_level(fast), zlib_level(default.getvalue())) == (1, 2)
    assert Image.open(io.BytesIO(fast)).tobytes() == Image.open(default).tobytes()
    assert len(fast) < 1.3 * len(default.getvalue())
