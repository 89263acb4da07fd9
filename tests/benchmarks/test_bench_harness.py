"""The harness benchmark still runs and prints what docs/fuzzing.md quotes (a tiny run)."""

from __future__ import annotations

import re

import pytest

from tests.benchmarks import bench_harness


def test_the_harness_benchmark_prints_its_ratios_and_where_fuzz_spends_its_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench_harness.main(["--scenarios", "8", "--rounds", "1", "--cpu"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"fuzz / its floor: +\d+\.\d\dx", out), out
    requests = re.search(r"\(([\d.]+) s for the (\d+) requests fuzz made", out)
    assert requests and int(requests.group(2)) > 0, out
    split = re.search(
        r"the SDK's part: ([\d.]+) ms a request inside fuzz, ([\d.]+) ms in the floor's loop \(([\d.]+)x.*"
        r"Hypothesis\) ([\d.]+)x that floor; all of it ([\d.]+)x",
        out,
    )
    assert split, out
    in_place, alone, ratio, rest, whole = (float(g) for g in split.groups())
    assert ratio == pytest.approx(in_place / alone, abs=0.02)
    # The two parts add up to the whole: the SDK's part in floor units and the rest.
    assert rest + ratio == pytest.approx(whole, abs=0.05)
