"""The classifier: a small ReLU MLP on the encoded features (chapter 14, notebook 02).

The paper trains hidden layers [20, 10], BCE-with-logits, AdamW, 50 epochs, batch 64."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

__all__ = ["make_mlp", "train_mlp", "predict_logit"]


def make_mlp(n_in: int, hidden: Sequence[int] = (20, 10), seed: int = 0) -> torch.nn.Sequential:
    """Linear-ReLU-...-Linear with one output logit."""
    if n_in < 1 or any(h < 1 for h in hidden):
        raise ValueError(f"n_in and hidden sizes must be positive, got {n_in}, {tuple(hidden)}")
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    d = n_in
    for h in hidden:
        layers += [torch.nn.Linear(d, h), torch.nn.ReLU()]
        d = h
    layers.append(torch.nn.Linear(d, 1))
    return torch.nn.Sequential(*layers).double()


def train_mlp(E: np.ndarray, y: np.ndarray, hidden: Sequence[int] = (20, 10), *, n_epochs: int = 50,
              batch_size: int = 64, lr: float = 1e-3, seed: int = 0) -> torch.nn.Sequential:
    """Train the classifier on encoded rows ``E`` and 0/1 labels ``y`` (notebook 14/02)."""
    E = np.asarray(E, dtype=float)
    y = np.asarray(y, dtype=float)
    if E.ndim != 2 or y.shape != (len(E),):
        raise ValueError(f"E must be (rows, features) and y (rows,), got {E.shape}, {y.shape}")
    net = make_mlp(E.shape[1], hidden, seed)
    opt = torch.optim.AdamW(net.parameters(), lr=lr)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    g = torch.Generator().manual_seed(seed)
    Xt, yt = torch.from_numpy(E), torch.from_numpy(y)
    for _ in range(n_epochs):
        perm = torch.randperm(len(Xt), generator=g)
        for i in range(0, len(Xt), batch_size):
            idx = perm[i:i + batch_size]
            opt.zero_grad()
            loss = loss_fn(net(Xt[idx]).squeeze(1), yt[idx])
            loss.backward()
            opt.step()
    net.eval()
    return net


def predict_logit(net: torch.nn.Module, E: np.ndarray) -> np.ndarray:
    """The classifier's logit for each encoded row."""
    with torch.no_grad():
        return net(torch.from_numpy(np.atleast_2d(np.asarray(E, dtype=float)))).squeeze(1).numpy()
