"""The fleet fields' checks (``config/fleet.py``): each bad combination refused in one
line naming the field, exit 2, nothing written."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from herdsim.cli.app import app

CASES = [
    (["downstream.outages.0.replica=10"], "downstream.outages.0.replica: replica 10 does "
                                          "not exist: replicas are 0 to 9"),
    (["downstream.replicas=null"], "downstream.balancer: balancer needs replicas"),
    (["downstream.balancer.kind=maglev", "downstream.balancer.choice_count=null",
      "downstream.balancer.table_size=1000"], "1000 is not a prime"),
    (["downstream.replicas=5000"], "downstream.replicas: Input should be less than or "
                                   "equal to 1000"),
    (["downstream.balancer.kind=weighted", "downstream.balancer.choice_count=null",
      "downstream.balancer.weights=[1,2]"], "2 weights for 10 replicas"),
]


@pytest.mark.parametrize(("sets", "message"), CASES, ids=[c[1][:30] for c in CASES])
def test_a_bad_fleet_is_one_line_exit_2_nothing_written(tmp_path, sets, message):
    out = tmp_path / "out"
    args = ["run", "fleet", "--out", str(out), "-q"]
    for s in sets:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert not out.exists()
