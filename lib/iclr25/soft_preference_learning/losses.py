"""The soft preference learning (SPL) loss and the sigmoid DPO loss it generalises.

Chapter 17. The RLHF objective with a KL penalty,

    max_pi  E_pi[r] - beta * KL(pi || pi_ref),   KL = CE(pi, pi_ref) - H(pi),

ties the entropy bonus H(pi) and the cross-entropy penalty CE(pi, pi_ref) = -E_pi log pi_ref to
one coefficient. SPL gives each its own,

    max_pi  E_pi[r] + alpha * H(pi) - beta * CE(pi, pi_ref),

whose maximiser is pi*(y) ∝ pi_ref(y)^(beta/alpha) exp(r(y)/alpha). Solving for the reward,
r = alpha log pi* - beta log pi_ref + const, and putting it into the Bradley-Terry likelihood of a
preference y_w > y_l (the constant cancels) gives the DPO-style loss

    L_SPL = -log sigmoid( alpha [log pi(y_w) - log pi(y_l)] - beta [log pi_ref(y_w) - log pi_ref(y_l)] ).

At alpha = beta it is the sigmoid DPO loss -log sigmoid(beta [(log pi(y_w) - log pi_ref(y_w)) -
(log pi(y_l) - log pi_ref(y_l))]) (tested to 1e-6).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["spl_loss", "dpo_loss", "dpo_loss_reference", "spl_margin", "check_coefficients"]


def check_coefficients(alpha: float, beta: float) -> None:
    """Raise a clear ``ValueError`` unless ``alpha > 0`` and ``beta >= 0`` (chapter 17)."""
    if not (isinstance(alpha, (int, float)) and alpha > 0):
        raise ValueError(f"alpha (the entropy coefficient) must be > 0, got {alpha!r}")
    if not (isinstance(beta, (int, float)) and beta >= 0):
        raise ValueError(f"beta (the cross-entropy coefficient) must be >= 0, got {beta!r}")


def spl_margin(pi_w: torch.Tensor, pi_l: torch.Tensor, ref_w: torch.Tensor, ref_l: torch.Tensor,
               alpha: float, beta: float) -> torch.Tensor:
    """The implicit reward margin ``alpha (pi_w - pi_l) - beta (ref_w - ref_l)`` of each pair
    (all arguments are sequence log-probabilities). Chapter 17."""
    return alpha * (pi_w - pi_l) - beta * (ref_w - ref_l)


def spl_loss(pi_w: torch.Tensor, pi_l: torch.Tensor, ref_w: torch.Tensor, ref_l: torch.Tensor,
             alpha: float, beta: float, *, weight: torch.Tensor | None = None,
             reduction: str = "mean") -> torch.Tensor:
    """The SPL loss ``-log sigmoid(alpha (pi_w - pi_l) - beta (ref_w - ref_l))`` (chapter 17).

    Parameters
    ----------
    pi_w, pi_l
        Policy log-probabilities of the preferred and the rejected responses, ``(n,)``.
    ref_w, ref_l
        The reference model's log-probabilities of the same responses (precomputed, no grad).
    alpha, beta
        The entropy and the cross-entropy coefficients; ``alpha = beta`` is DPO.
    weight
        Optional ``(n,)`` non-negative pair weights (e.g. counts of identical pairs); the mean is
        then weighted.
    reduction
        ``"mean"``, ``"sum"`` or ``"none"``.
    """
    check_coefficients(alpha, beta)
    shapes = {t.shape for t in (pi_w, pi_l, ref_w, ref_l)}
    if len(shapes) != 1:
        raise ValueError(f"pi_w, pi_l, ref_w, ref_l must have one shape, got {sorted(map(tuple, shapes))}")
    losses = -F.logsigmoid(spl_margin(pi_w, pi_l, ref_w, ref_l, alpha, beta))
    if weight is not None:
        if weight.shape != losses.shape:
            raise ValueError(f"weight must have shape {tuple(losses.shape)}, got {tuple(weight.shape)}")
        if reduction == "none":
            return losses * weight
        total = (losses * weight).sum()
        return total / weight.sum().clamp(min=1e-12) if reduction == "mean" else total
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    if reduction == "none":
        return losses
    raise ValueError(f"unknown reduction {reduction!r}; valid: 'mean', 'sum', 'none'")


def dpo_loss(pi_w, pi_l, ref_w, ref_l, beta: float, **kwargs) -> torch.Tensor:
    """Sigmoid DPO: :func:`spl_loss` with ``alpha = beta`` (chapter 17)."""
    return spl_loss(pi_w, pi_l, ref_w, ref_l, alpha=beta, beta=beta, **kwargs)


def dpo_loss_reference(pi_w, pi_l, ref_w, ref_l, beta: float) -> torch.Tensor:
    """The sigmoid DPO loss written as Rafailov et al. (2023) and TRL's ``loss_type="sigmoid"``
    write it (mean over pairs, no label smoothing): the reference the SPL loss at
    ``alpha = beta`` is tested against (chapter 17)."""
    logits = (pi_w - ref_w) - (pi_l - ref_l)
    return (-F.logsigmoid(beta * logits)).mean()
