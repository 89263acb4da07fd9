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
    assert re.search(r"fuzz / floor: +\d+\.\d\dx", out), out
    split = re.search(
        r"fuzz's own (\d+) requests: the SDK's part ([\d.]+) ms each inside fuzz, ([\d.]+) ms in the floor's loop \(([\d.]+)x",
        out,
    )
    assert split, out
    requests, in_place, alone, ratio = split.groups()
    assert int(requests) > 0
    assert float(ratio) == pytest.approx(float(in_place) / float(alone), abs=0.02)
    rest = re.search(r"Hypothesis\): ([\d.]+)x that floor; all of it ([\d.]+)x", out)
    assert rest, out
    # The two parts add up to the whole: the SDK's part in floor units and the rest.
    assert float(rest.group(1)) + float(ratio) == pytest.approx(float(rest.group(2)), abs=0.05)
