"""The tour of bad input (tests/cli_cases.py): each case is refused in one line, in the user's
language, with exit code 2, nothing started and nothing written. Run in-process: no case may
get as far as importing TensorFlow; `benchmarks/cli_tour.py` runs the same cases as processes."""

import pytest
from cli_cases import cases, run_in_process

CASES = cases()


def test_the_tour_is_long_enough_and_its_names_are_unique():
    assert len(CASES) >= 200
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_refused_in_one_line_and_changes_nothing(case, tmp_path):
    outcome = run_in_process(case, tmp_path)
    assert outcome.problems(case) == [], outcome.stderr
