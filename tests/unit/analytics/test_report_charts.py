"""The analytics report's charts of counts tick at whole numbers (a small fleet's histogram used
to show 0.5, 1.5, ... groups)."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nsfleet.analytics.report import _hist, _stacked_bars


def _yticks(draw) -> list[float]:
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    draw(ax)
    fig.canvas.draw()
    low, high = ax.get_ylim()
    return [t for t in ax.get_yticks() if low <= t <= high]


@pytest.mark.parametrize("draw", [
    _hist(pd.Series([3, 5, 5, 9]), "topics in the group"),
    _stacked_bars(pd.DataFrame({"cluster": ["c1", "c2"], "zone": ["z", "z"], "brokers": [1, 2]})),
], ids=["histogram", "stacked-bars"])
def test_count_axes_tick_at_whole_numbers(draw) -> None:
    ticks = _yticks(draw)
    assert len(ticks) >= 2
    assert all(float(t).is_integer() for t in ticks), ticks
