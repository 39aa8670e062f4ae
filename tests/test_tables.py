"""Terminal table cells: figures stay inside their columns."""

from hypothesis import given
from hypothesis import strategies as st

from blksim.cli.tables import _fmt_p
from blksim.common.histogram import percentile_figure


@given(st.floats(min_value=0.0, max_value=1e7, allow_nan=False))
def test_a_percentile_cell_keeps_to_its_column(ms):
    # a percentile cell is 9 characters with a space before the figure, so neighbouring
    # columns never run together (a Q2D p50 of 1 ns once printed as "0.00000100")
    cell = _fmt_p(percentile_figure(ms))
    assert len(cell) == 9 and cell[0] == " "


def test_percentile_cells_keep_three_significant_digits():
    assert _fmt_p(12.345) == "     12.3"
    assert _fmt_p(0.0123) == "   0.0123"
    assert _fmt_p(0.0) == "    0.000"
