"""Wide and long choice tables into ChoiceData (checked cell by cell on small generated frames),
and the warning when rule weights sit at w_max."""

import numpy as np
import pandas as pd
import pytest

import iclr25.logic_logit as ll


def _wide():
    return pd.DataFrame({
        "cost_train": [10.0, 12.0, 8.0], "cost_car": [20.0, 5.0, 7.0], "cost_sm": [15.0, 9.0, 30.0],
        "time_train": [60, 50, 70], "time_car": [40, 45, 35],
        "av_sm": [1, 1, 0], "mode": ["car", "train", "car"]})


def test_wide_matches_the_table_cell_by_cell():
    df = _wide()
    d = ll.from_wide(df, ["train", "car", "sm"],
                     {"cost": {"train": "cost_train", "car": "cost_car", "sm": "cost_sm"},
                      "time": {"train": "time_train", "car": "time_car"}},
                     choice="mode", availability={"sm": "av_sm"})
    assert d.item_names == ("train", "car", "sm") and d.feature_names == ("cost", "time")
    assert d.choice.tolist() == [1, 0, 1]
    assert d.mask.tolist() == [[True] * 3, [True] * 3, [True, True, False]]
    for i in range(3):
        for j, a in enumerate(["train", "car", "sm"]):
            if d.mask[i, j]:
                assert d.X[i, j, 0] == df[f"cost_{a}"][i]
                assert d.X[i, j, 1] == (df[f"time_{a}"][i] if a != "sm" else 0.0)
    with pytest.raises(ValueError, match="not alternatives.*valid: train, car, sm"):
        ll.from_wide(df.assign(mode=["bus", "car", "car"]), ["train", "car", "sm"],
                     {"cost": {"train": "cost_train"}}, choice="mode")
    with pytest.raises(KeyError, match="no column 'price'"):
        ll.from_wide(df, ["train"], {"cost": {"train": "price"}}, choice="mode")
    with pytest.raises(ValueError, match="not offered"):   # chosen sm where it is unavailable
        ll.from_wide(df.assign(mode=["car", "train", "sm"]), ["train", "car", "sm"],
                     {"cost": {"sm": "cost_sm"}}, choice="mode", availability={"sm": "av_sm"})


def test_long_with_fixed_alternatives_and_with_variable_offer_sets():
    long = pd.DataFrame({"id": [7, 7, 7, 3, 3], "alt": ["a", "b", "c", "c", "a"],
                         "chosen": [0, 1, 0, 1, 0], "price": [1.0, 2.0, 3.0, 4.0, 5.0]})
    d = ll.from_long(long, "id", "alt", "chosen", ["price"], alternatives=["a", "b", "c"])
    assert d.meta["obs_ids"].tolist() == [7, 3]                # order of first appearance
    assert d.choice.tolist() == [1, 2]
    assert d.mask.tolist() == [[True, True, True], [True, False, True]]
    assert d.X[1, 0, 0] == 5.0 and d.X[1, 2, 0] == 4.0 and d.X[0, 2, 0] == 3.0
    v = ll.from_long(long, "id", "alt", "chosen", ["price"])   # slots in row order, padded
    assert v.item_names is None and v.mask.sum(1).tolist() == [3, 2]
    assert v.choice.tolist() == [1, 0] and v.X[1, :2, 0].tolist() == [4.0, 5.0]
    with pytest.raises(ValueError, match="situation 7 has 2 chosen rows"):
        ll.from_long(long.assign(chosen=[1, 1, 0, 1, 0]), "id", "alt", "chosen", ["price"])
    with pytest.raises(ValueError, match="must be 0/1"):
        ll.from_long(long.assign(chosen=[0, 2, 0, 1, 0]), "id", "alt", "chosen", ["price"])
    # a wide table and its long form give the same data
    wide = _wide()
    rows = [{"id": i, "alt": a, "chosen": int(wide["mode"][i] == a), "cost": wide[f"cost_{a}"][i]}
            for i in range(3) for a in ("train", "car")]
    lw = ll.from_long(pd.DataFrame(rows), "id", "alt", "chosen", ["cost"], alternatives=["train", "car"])
    ww = ll.from_wide(wide, ["train", "car"], {"cost": {"train": "cost_train", "car": "cost_car"}},
                      choice="mode")
    np.testing.assert_array_equal(lw.X, ww.X)
    np.testing.assert_array_equal(lw.choice, ww.choice)


def test_weights_at_the_cap_warn_with_the_rule():
    data, lib, _ = ll.make_hotel_search(600, seed=0)
    with pytest.warns(UserWarning, match=r"sit at the bound w_max = 0.5 .*larger w_max"):
        ll.LogicLogit(library=lib, w_max=0.5, max_types=1, max_rules=1).fit(data)
