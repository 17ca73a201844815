"""The task-set figure of notebook 07/01: one series per category, a clear error on bad input."""

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")

from iclr25.cybench.plots import plot_task_set  # noqa: E402


def test_plot_task_set_draws_one_series_per_category_and_checks_columns():
    df = pd.DataFrame({"category": ["crypto", "web", "crypto"], "FST (min, our estimate)": [2, 10, 60],
                       "steps": [2, 3, 5]})
    fig = plot_task_set(df)
    lines = fig.axes[0].get_lines()
    assert sorted(l.get_label() for l in lines) == ["crypto", "web"]
    assert sorted(lines[0].get_xdata()) == [2, 60]
    with pytest.raises(ValueError, match="steps"):
        plot_task_set(df.drop(columns="steps"))
