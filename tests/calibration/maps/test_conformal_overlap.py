"""`fit_conformal` refuses label lines routed to a second rater (``overlap``) when nothing
beside them shows the session chose its items alike (#60)."""

import pytest

from jurybox.calibration.errors import InputDataError
from jurybox.calibration.maps.conformal import fit_conformal

OVERLAP = {"strategy": "overlap", "probability": None}


def test_overlap_lines_alone_are_refused_naming_the_item():
    lines = [{"id": "q7", "rater": "ben", "quality": 2, "selection": OVERLAP}]
    with pytest.raises(InputDataError, match="item 'q7'.*overlap") as got:
        fit_conformal(lines, [], {})
    assert got.value.field == "selection"


def test_overlap_lines_beside_uniform_choices_pass_the_design_check():
    lines = [
        {"id": "q7", "rater": "ana", "quality": 2, "selection": {"strategy": "uniform"}},
        {"id": "q7", "rater": "ben", "quality": 2, "selection": OVERLAP},
    ]
    # Past the design checks, to the data: no criterion to fit here.
    with pytest.raises(InputDataError, match="nothing to fit"):
        fit_conformal(lines, [], {})
