"""``herdsim predict``'s output directory: a run's layout (``timeseries.csv``,
``summary.json``, ``scenario.yaml``, ``peak_rate.csv`` and the timeline), written the
same way (:mod:`herdsim.outputs.compare_dir`), with no ``jobs.parquet`` or ``sleeps.csv``
(a fluid has no individual jobs or sleeps); read back by the one reader of output
directories (:func:`~herdsim.outputs.compare_dir.load_outputs`: a summary marked
``predicted`` holds mean amounts)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from herdsim.outputs.atomic import staged_dir
from herdsim.outputs.compare_dir import _drawing, _report_failures, save_figures, write_scenario
from herdsim.results.predicted import FIGURES, Prediction


def save_prediction(prediction: Prediction, out: str | Path,
                    formats: Sequence[str] = ("png",)) -> Path:
    """Write *prediction* into the new directory *out* (it appears only once complete)."""
    with staged_dir(out) as staging:
        staging.mkdir()
        prediction.timeseries.to_csv(staging / "timeseries.csv", index=False)
        (staging / "summary.json").write_text(json.dumps(prediction.summary, indent=2)
                                              + "\n")
        write_scenario(prediction.scenario, staging)
        prediction.peaks.to_csv(staging / "peak_rate.csv", index=False)
        failures: list[str] = []
        with _drawing(failures):
            save_figures(prediction.comparison(), staging, formats, FIGURES)
    _report_failures(Path(out), failures)
    return Path(out)
