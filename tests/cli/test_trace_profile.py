"""``herdsim trace --profile`` writes only what herdsim's own scenario reader accepts."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from herdsim.cli.app import app
from herdsim.config import files
from herdsim.config.reading import parse_yaml, read_text


def _trace(path, n: int, seed: int = 2) -> None:
    gaps = np.random.default_rng(seed).exponential(1.0, n)
    path.write_text("time\n" + "\n".join(f"{t:.3f}" for t in np.cumsum(gaps)) + "\n")


@pytest.mark.slow
@pytest.mark.parametrize("width", ["1s", "10m"])  # 1s: about 2 MB of steps
def test_a_profile_is_written_readable_or_refused_before_anything(tmp_path, width):
    trace = tmp_path / "t.csv"
    _trace(trace, 100_000)
    out = tmp_path / "profile.yaml"
    result = CliRunner().invoke(app, ["trace", str(trace), "--bin", width, "--profile",
                                      str(out)])
    if result.exit_code == 0:  # what was written, the reader takes whole
        steps = parse_yaml(read_text(out))["workload"]["profile"]
        assert steps == yaml.safe_load(out.read_text())["workload"]["profile"]
        assert out.stat().st_size <= files.SCENARIO_LIMIT
    else:
        assert result.exit_code == 2, result.output
        assert not out.exists()
        assert result.output.count("\n") == 1  # one line, nothing printed before it
        assert f"--profile {out}" in result.output and "wider --bin" in result.output
        assert "more than the 1,048,576" in result.output

