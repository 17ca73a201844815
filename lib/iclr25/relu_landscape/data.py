"""The paper's three toy data sets (Wu, Simsek & Ged, ICLR 2025, Figs. 3, 11, 12).

Each returns ``(X, Y)`` as float64 arrays: ``X`` is ``N x d`` (a constant-1 column carries the bias
where the paper uses one), ``Y`` is ``N x k``. The values are those of the paper's experiments.
"""

from __future__ import annotations

import numpy as np

__all__ = ["five_point", "three_d_seven_point", "two_d_two_out", "DATASETS", "load"]


def five_point() -> tuple[np.ndarray, np.ndarray]:
    """Fig. 3 / Fig. 10: five 1-D inputs with a bias column (d = 2), scalar targets.

    Introduced in chapter 18, notebook ``01-saddle-to-saddle``.
    """
    x = np.array([-1.0, -0.6, -0.1, 0.3, 0.7])
    X = np.stack([x, np.ones_like(x)], axis=1)
    Y = np.array([0.28, -0.1, 0.03, 0.23, -0.22])[:, None]
    return X, Y


def three_d_seven_point() -> tuple[np.ndarray, np.ndarray]:
    """Fig. 11: seven 3-D inputs (no bias column), scalar targets.

    Introduced in chapter 18, notebook ``03-network-embedding``.
    """
    X = np.array([[-0.3, -0.75, -0.5], [-0.2, -0.2, 0.4], [-0.6, 1.0, -1.0], [-0.4, 0.4, 0.3],
                  [0.6, -0.1, -0.7], [0.4, -0.9, 0.3], [0.2, 0.2, -0.5]])
    Y = np.array([-0.5, 0.1, -0.6, 0.3, 0.8, -0.3, -0.1])[:, None]
    return X, Y


def two_d_two_out() -> tuple[np.ndarray, np.ndarray]:
    """Fig. 12: four 2-D inputs, 2-D targets.

    Introduced in chapter 18, notebook ``03-network-embedding``.
    """
    X = np.array([[-0.3, 0.5], [1.0, 1.0], [-0.6, -1.0], [0.4, -0.4]])
    Y = np.array([[0.6, -0.5], [0.5, -1.0], [-0.4, 0.6], [0.8, 0.2]])
    return X, Y


DATASETS = {"five_point": five_point, "three_d_seven_point": three_d_seven_point,
            "two_d_two_out": two_d_two_out}


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """A data set by name; an unknown name raises ``KeyError`` listing the valid ones."""
    try:
        return DATASETS[name]()
    except KeyError:
        raise KeyError(f"unknown data set {name!r}; valid: {', '.join(DATASETS)}") from None
