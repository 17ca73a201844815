"""The retrieval problem: D chained lookups among distractor pairs (chapter 11).

Introduced in ``notebooks/11-retrieval-problem/01-task-and-bound.ipynb``.

The paper (Musat, ICLR 2025) generalises the induction-head task to D retrieval steps and proves
(Theorem 1) that under its Assumption 1 the target can reach the residual stream only if the number
of layers t satisfies t >= log_3(2D). The paper's exact token format is not public; this module is a
reconstruction *in the spirit of* the paper.

Token format (ours)
-------------------
One sequence position holds one *fact*: a key symbol ``a`` and a value symbol ``b`` (``a -> b``),
and in the conditional variant a condition ``c`` as well. A position's input vector is the sum of
the embeddings of its slots (see :func:`iclr25.retrieval_problem.model.make_model`), so the key and
the value of a fact share a position and **one attention hop retrieves one fact**. The context is K
shuffled facts forming ``n_chains`` disjoint chains ``s_0 -> s_1 -> ... -> s_Dmax``; the query's
chain is ``q -> c_1 -> ... -> c_Dmax`` and the others distract (keys are distinct, so the chain
from ``q`` is unique). The last position is the query: the symbol ``q`` plus a depth marker D
(plus the condition). The target at the query is ``c_D``.

Token ids (``RetrievalTask.vocab_size`` in all)::

    0 .. V-1               symbols in the key/query role (also the output classes)
    V .. 2V-1              symbols in the value role
    2V .. 2V+Dmax-1        depth markers D = 1..Dmax (query position only)
    2V+Dmax .. +n_cond-1   conditions (conditional variant)
    vocab_size - 1         PAD (an empty slot; its embedding is masked out)

Inputs are ``(batch, K+1, 3)`` integer arrays: slot 0 key/query, slot 1 value/depth, slot 2
condition or PAD.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["RetrievalTask", "Batch", "min_layers", "max_depth", "depth_table", "follow_chain",
           "IC_MODES", "SAMPLERS", "ORDERS", "composition_ranks", "reach", "reach_loop",
           "binding_targets", "binding_targets_loop"]

#: implicit-curriculum modes: ``"mixed"`` draws the depth of every example uniformly in
#: ``1..Dmax`` (the easy hops teach the first heads); ``"staged"`` draws it uniformly in
#: ``1..d(step)``, with ``d`` growing from 2 to ``Dmax`` in equal stages over training (an explicit
#: curriculum on top of the mixture); ``None`` trains on ``Dmax`` only.
IC_MODES = ("mixed", "staged", None)
#: sampler back ends: vectorised numpy and a per-example reference loop (same random draws).
SAMPLERS = ("numpy", "loop")
#: context orders: ``"random"`` (every fact at a uniformly random position) or ``"composable"``
#: (each chain's facts in a random order in which the causal mask lets a t-layer model compose
#: floor(3^t / 2) hops; see :func:`composition_ranks` and :func:`reach`).
ORDERS = ("random", "composable")
N_SLOTS = 3


def min_layers(D: int | np.ndarray) -> int | np.ndarray:
    """Theorem 1's minimum depth: the least integer t with 3**t >= 2D, i.e. ceil(log_3(2D)).

    Introduced in ``01-task-and-bound``. Computed with integers (no floating-point log), so
    ``min_layers(1) == 1``, ``min_layers(2) == 2``, ``min_layers(5) == 3``, ``min_layers(14) == 4``.
    """
    arr = np.asarray(D)
    if np.any(arr < 1) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"D must be a positive integer (number of retrieval steps), got {D!r}")
    flat = [_min_layers_int(int(d)) for d in arr.ravel()]
    out = np.array(flat, dtype=int).reshape(arr.shape)
    return int(out) if out.ndim == 0 else out


def _min_layers_int(D: int) -> int:
    t = 0
    while 3 ** t < 2 * D:
        t += 1
    return max(t, 1)


def max_depth(t: int) -> int:
    """The largest D that Theorem 1 allows with t layers: floor(3**t / 2).

    Introduced in ``01-task-and-bound`` (t = 1, 2, 3, 4 -> 1, 4, 13, 40).
    """
    if int(t) != t or t < 1:
        raise ValueError(f"t must be a positive integer (number of layers), got {t!r}")
    return 3 ** int(t) // 2


def depth_table(D_values=range(1, 11)):
    """A ``pandas.DataFrame`` with D, log_3(2D) and the minimum number of layers.

    Introduced in ``01-task-and-bound``.
    """
    import pandas as pd

    D = np.asarray(list(D_values), dtype=int)
    return pd.DataFrame({"D": D, "log3(2D)": np.log(2 * D) / np.log(3),
                         "min layers t": min_layers(D)})


class Batch(NamedTuple):
    """A sampled batch.

    Attributes
    ----------
    X
        ``(batch, K+1, 3)`` int64 token ids (see the module docstring).
    y
        ``(batch,)`` the answer symbol ``c_D`` (an id in ``0..V-1``).
    depth
        ``(batch,)`` the number of hops D of each example.
    hop_pos
        ``(batch, Dmax)`` the position of the fact used at hop k (``hop_pos[:, k-1]``); the chain's
        facts beyond an example's depth are listed too.
    chain
        ``(batch, Dmax+1)`` the symbols ``q, c_1, ..., c_Dmax``.
    cond
        ``(batch,)`` the query's condition (all zeros in the plain task).
    """

    X: np.ndarray
    y: np.ndarray
    depth: np.ndarray
    hop_pos: np.ndarray
    chain: np.ndarray
    cond: np.ndarray


@dataclass(frozen=True)
class RetrievalTask:
    """A generator of retrieval problems, sampled on the fly.

    Introduced in ``01-task-and-bound``.

    The context holds ``n_chains`` disjoint chains of ``max_depth`` facts each, shuffled; the
    query starts at the head of chain 0. Because every distractor is itself a chain, the answer
    ``c_D`` cannot be told apart from the other chains' depth-D symbols without following the
    chain: a model that cannot compose D hops is at chance ``1 / n_chains`` (see
    :attr:`chance`).

    Parameters
    ----------
    n_symbols
        Alphabet size V (paper: not public; we use 16-32).
    n_chains
        Chains in the context (one is the query's, the others distract).
    max_depth
        Dmax, the length of every chain; an example's depth D is in ``1..Dmax``.
    conditional
        The conditional variant: every fact carries one of ``n_conditions`` conditions, the
        query's chain uses the query's condition, and for every key of that chain a *decoy* fact
        with the same key but another condition points to a fresh symbol, so ignoring the
        condition at any hop gives a wrong answer.
    n_conditions
        Number of conditions (conditional variant only).
    order
        ``"random"``: the facts are shuffled uniformly. ``"composable"``: the chains are interleaved
        at random, but within each chain a fact that assembles a longer segment of the chain
        (:func:`composition_ranks`) comes after the facts it assembles it from, so that under the
        causal mask a t-layer model can follow ``floor(3**t / 2)`` hops, Theorem 1's capacity
        (with ``"random"``, it can only when the draw happens to be favourable: :func:`reach`).
    """

    n_symbols: int = 16
    n_chains: int = 4
    max_depth: int = 2
    conditional: bool = False
    n_conditions: int = 2
    order: str = "random"

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"unknown order {self.order!r}; valid: {', '.join(ORDERS)}")
        for name in ("n_symbols", "n_chains", "max_depth", "n_conditions"):
            v = getattr(self, name)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"RetrievalTask.{name} must be a positive integer, got {v!r}")
        if self.n_symbols < self.n_used_symbols:
            raise ValueError(f"n_symbols={self.n_symbols} is too small: {self.n_chains} chains of "
                             f"{self.max_depth} facts need n_symbols >= {self.n_used_symbols}")
        if self.conditional and self.n_conditions < 2:
            raise ValueError("the conditional variant needs n_conditions >= 2")

    # ---- sizes and vocabulary ----------------------------------------------------------------
    @property
    def n_used_symbols(self) -> int:
        """Distinct symbols one example uses."""
        return self.n_chains * (self.max_depth + 1) + (self.max_depth if self.conditional else 0)

    @property
    def n_pairs(self) -> int:
        """Facts K in the context (chains plus decoys)."""
        return self.n_chains * self.max_depth + (self.max_depth if self.conditional else 0)

    @property
    def chance(self) -> float:
        """Accuracy of a model that knows the depth-D symbols of all chains but cannot tell which
        chain starts at the query: ``1 / n_chains``."""
        return 1.0 / self.n_chains

    @property
    def seq_len(self) -> int:
        """K facts plus the query position."""
        return self.n_pairs + 1

    @property
    def value_offset(self) -> int:
        return self.n_symbols

    @property
    def depth_offset(self) -> int:
        return 2 * self.n_symbols

    @property
    def cond_offset(self) -> int:
        return 2 * self.n_symbols + self.max_depth

    @property
    def pad_id(self) -> int:
        return self.cond_offset + self.n_conditions

    @property
    def vocab_size(self) -> int:
        return self.pad_id + 1

    # ---- sampling --------------------------------------------------------------------------
    def _depths(self, rng: np.random.Generator, batch_size: int, depth) -> np.ndarray:
        if isinstance(depth, str) and depth == "mixed":
            return rng.integers(1, self.max_depth + 1, size=batch_size)
        if isinstance(depth, tuple):   # (lo, hi): uniform in lo..hi
            if (len(depth) != 2 or any(int(d) != d for d in depth)
                    or not 1 <= depth[0] <= depth[1] <= self.max_depth):
                raise ValueError(f"a depth range must be (lo, hi) with 1 <= lo <= hi <= "
                                 f"{self.max_depth}, got {depth!r}")
            return rng.integers(int(depth[0]), int(depth[1]) + 1, size=batch_size)
        if depth is None:
            depth = self.max_depth
        if isinstance(depth, str) or int(depth) != depth or not 1 <= int(depth) <= self.max_depth:
            raise ValueError(f"depth must be 'mixed', None or an integer in 1..{self.max_depth}, "
                             f"got {depth!r}")
        return np.full(batch_size, int(depth))

    def _draws(self, rng: np.random.Generator, batch_size: int) -> dict:
        """Every random number an example needs, drawn at once (shared by both samplers)."""
        V, K, C = self.n_symbols, self.n_pairs, self.n_conditions
        return {
            "perm": np.argsort(rng.random((batch_size, V)), axis=1),    # distinct symbols
            "order": np.argsort(rng.random((batch_size, K)), axis=1),   # fact i -> position
            "cond": rng.integers(0, C, size=batch_size),                # the query's condition
            "chain_cond": rng.integers(0, C, size=(batch_size, self.n_chains)),
            "decoy_shift": rng.integers(1, max(C, 2), size=batch_size),
            # tie-breaks among a chain's facts of equal rank (composable order only; drawn last,
            # so the random order's draws are unchanged)
            **({"tie": rng.random((batch_size, self.n_chains, self.max_depth))}
               if self.order == "composable" else {}),
        }

    def sample(self, batch_size: int, seed: int | np.random.Generator | None = None, *,
               depth="mixed", sampler: str = "numpy") -> Batch:
        """Draw ``batch_size`` examples.

        Introduced in ``01-task-and-bound``.

        Parameters
        ----------
        batch_size
            Number of examples.
        seed
            An int, a ``numpy.random.Generator`` (advanced in place) or ``None``.
        depth
            ``"mixed"`` (uniform in ``1..Dmax``: the implicit curriculum), ``None`` (``Dmax``),
            an integer D, or a range ``(lo, hi)`` (uniform in ``lo..hi``).
        sampler
            ``"numpy"`` (vectorised) or ``"loop"`` (the per-example reference); both consume the
            same random draws and return identical batches.
        """
        if sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {sampler!r}; valid: {', '.join(SAMPLERS)}")
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        depths = self._depths(rng, int(batch_size), depth)
        draws = self._draws(rng, int(batch_size))
        if sampler == "numpy":
            return self._assemble_numpy(depths, draws)
        return self._assemble_loop(depths, draws)

    def _assemble_numpy(self, depths, draws) -> Batch:
        Dm, n, C, K = self.max_depth, self.n_chains, self.n_conditions, self.n_pairs
        perm = draws["perm"]
        B = perm.shape[0]
        chains = perm[:, :n * (Dm + 1)].reshape(B, n, Dm + 1)          # (B, chains, Dmax+1)
        conds = draws["chain_cond"].copy()
        conds[:, 0] = draws["cond"]
        keys = chains[:, :, :-1].reshape(B, n * Dm)                     # chain j's facts are
        vals = chains[:, :, 1:].reshape(B, n * Dm)                      # j*Dm .. j*Dm+Dm-1
        fcond = np.repeat(conds, Dm, axis=1)
        if self.conditional:  # decoys: chain 0's keys under another condition, fresh values
            dcond = (draws["cond"] + draws["decoy_shift"]) % C
            keys = np.concatenate([keys, chains[:, 0, :-1]], axis=1)
            vals = np.concatenate([vals, perm[:, n * (Dm + 1):n * (Dm + 1) + Dm]], axis=1)
            fcond = np.concatenate([fcond, np.repeat(dcond[:, None], Dm, axis=1)], axis=1)
        order = self._positions(draws)
        X = np.full((B, K + 1, N_SLOTS), self.pad_id, dtype=np.int64)
        rows = np.arange(B)[:, None]
        X[rows, order, 0] = keys
        X[rows, order, 1] = vals + self.value_offset
        if self.conditional:
            X[rows, order, 2] = fcond + self.cond_offset
        X[:, K, 0] = chains[:, 0, 0]
        X[:, K, 1] = self.depth_offset + depths - 1
        if self.conditional:
            X[:, K, 2] = self.cond_offset + draws["cond"]
        y = chains[np.arange(B), 0, depths]
        return Batch(X, y.astype(np.int64), depths.astype(np.int64),
                     order[:, :Dm].astype(np.int64), chains[:, 0].astype(np.int64),
                     draws["cond"].astype(np.int64))

    def _positions(self, draws) -> np.ndarray:
        """``(B, K)``: the position of every fact (canonical order: chain j's facts at
        ``j*Dmax .. j*Dmax+Dmax-1``, then the decoys). Vectorised."""
        order = draws["order"]
        if self.order == "random":
            return order
        B, Dm, n = order.shape[0], self.max_depth, self.n_chains
        chain_pos = np.sort(order[:, :n * Dm].reshape(B, n, Dm), axis=-1)   # each chain's slots
        key = composition_ranks(Dm)[None, None, :] + draws["tie"]          # rank, random ties
        rank_of = np.argsort(np.argsort(key, axis=-1), axis=-1)             # fact -> slot index
        out = order.copy()
        out[:, :n * Dm] = np.take_along_axis(chain_pos, rank_of, axis=-1).reshape(B, n * Dm)
        return out

    def _positions_loop(self, draws, b: int) -> list[int]:
        """:meth:`_positions` for one example, with Python loops (the reference)."""
        order = [int(p) for p in draws["order"][b]]
        if self.order == "random":
            return order
        Dm, ranks = self.max_depth, composition_ranks(self.max_depth)
        for j in range(self.n_chains):
            slots = sorted(order[j * Dm:(j + 1) * Dm])
            facts = sorted(range(Dm), key=lambda k: ranks[k] + float(draws["tie"][b, j, k]))
            for slot, k in zip(slots, facts):
                order[j * Dm + k] = slot
        return order

    def _assemble_loop(self, depths, draws) -> Batch:
        Dm, n, C, K = self.max_depth, self.n_chains, self.n_conditions, self.n_pairs
        B = len(depths)
        X = np.full((B, K + 1, N_SLOTS), self.pad_id, dtype=np.int64)
        y = np.zeros(B, dtype=np.int64)
        hop_pos = np.zeros((B, Dm), dtype=np.int64)
        chain0 = np.zeros((B, Dm + 1), dtype=np.int64)
        for b in range(B):
            pos = self._positions_loop(draws, b)
            perm = [int(s) for s in draws["perm"][b]]
            c_star = int(draws["cond"][b])
            facts = []  # (key, value, condition) in canonical order
            for j in range(n):
                sym = perm[j * (Dm + 1):(j + 1) * (Dm + 1)]
                c = c_star if j == 0 else int(draws["chain_cond"][b, j])
                facts += [(sym[k], sym[k + 1], c) for k in range(Dm)]
            if self.conditional:
                c_dec = (c_star + int(draws["decoy_shift"][b])) % C
                fresh = perm[n * (Dm + 1):]
                facts += [(perm[k], fresh[k], c_dec) for k in range(Dm)]
            for i, (key, val, c) in enumerate(facts):
                p = pos[i]
                X[b, p, 0], X[b, p, 1] = key, val + self.value_offset
                if self.conditional:
                    X[b, p, 2] = c + self.cond_offset
            X[b, K, 0] = perm[0]
            X[b, K, 1] = self.depth_offset + int(depths[b]) - 1
            if self.conditional:
                X[b, K, 2] = self.cond_offset + c_star
            y[b] = perm[int(depths[b])]
            hop_pos[b] = pos[:Dm]
            chain0[b] = perm[:Dm + 1]
        return Batch(X, y, depths.astype(np.int64), hop_pos, chain0,
                     draws["cond"].astype(np.int64))

    # ---- decoding --------------------------------------------------------------------------
    def decode(self, X: np.ndarray) -> list[str]:
        """One example's positions as text: ``"a->b"`` (``"a->b|c1"`` conditional), ``"q?D"``."""
        X = np.asarray(X)
        if X.shape != (self.seq_len, N_SLOTS):
            raise ValueError(f"expected one example of shape {(self.seq_len, N_SLOTS)}, got {X.shape}")
        out = []
        for p in range(self.n_pairs):
            s = f"{X[p, 0]}->{X[p, 1] - self.value_offset}"
            if self.conditional:
                s += f"|c{X[p, 2] - self.cond_offset}"
            out.append(s)
        q = f"{X[-1, 0]}?D={X[-1, 1] - self.depth_offset + 1}"
        if self.conditional:
            q += f"|c{X[-1, 2] - self.cond_offset}"
        return out + [q]


def follow_chain(task: RetrievalTask, X: np.ndarray) -> np.ndarray:
    """Brute-force answers: follow the facts from the query symbol D times (the ground truth the
    tests check the samplers against). Introduced in ``01-task-and-bound``."""
    X = np.asarray(X)
    if X.ndim != 3 or X.shape[1:] != (task.seq_len, N_SLOTS):
        raise ValueError(f"X must have shape (batch, {task.seq_len}, {N_SLOTS}), got {X.shape}")
    out = np.zeros(len(X), dtype=np.int64)
    for b, ex in enumerate(X):
        table = {}
        for p in range(task.n_pairs):
            key = (int(ex[p, 0]), int(ex[p, 2]))
            if key in table:
                raise ValueError(f"example {b}: two facts share key {key}; the chain is ambiguous")
            table[key] = int(ex[p, 1]) - task.value_offset
        cur, c = int(ex[-1, 0]), int(ex[-1, 2])
        for _ in range(int(ex[-1, 1]) - task.depth_offset + 1):
            cur = table[(cur, c)]
        out[b] = cur
    return out


def composition_ranks(n_facts: int) -> np.ndarray:
    """The rank of each hop's fact (index k = hop k+1) in the ideal log-depth circuit.

    Introduced in ``02-depth-vs-difficulty``. The query takes its chain in segments of
    1, 3, 9, ... facts (layer l of the query fetches a segment of 3**(l-1) facts); a segment of
    3**k facts is assembled, at layer k, at the position of its middle third's assembler, from its
    left and right thirds. Under the causal mask that needs the assembler to come *after* the two
    others: its rank is one more than theirs. Facts of rank 0 are leaves. Sorting a chain's facts
    by rank gives an order in which :func:`reach` equals ``floor(3**t / 2)``.
    """
    if isinstance(n_facts, bool) or int(n_facts) != n_facts or n_facts < 1:
        raise ValueError(f"n_facts must be a positive integer, got {n_facts!r}")
    n = int(n_facts)
    ranks = np.zeros(n, dtype=int)

    def assemble(lo: int, size: int) -> int:   # -> the index of the segment's assembler (or -1)
        if lo >= n:
            return -1
        if size == 1:
            return lo
        third = size // 3
        left, mid, right = (assemble(lo + i * third, third) for i in range(3))
        if mid < 0:
            return left
        ranks[mid] = max(ranks[mid], 1 + max(ranks[left], ranks[right] if right >= 0 else 0))
        return mid

    lo, size = 0, 1
    while lo < n:
        assemble(lo, size)
        lo, size = lo + size, size * 3
    return ranks


def reach_loop(hop_pos, n_layers: int) -> int:
    """Theorem 1's information flow, simulated with the causal mask for one example.

    Introduced in ``02-depth-vs-difficulty``. ``hop_pos[k]`` is the position of the fact of hop
    k+1 (the query is after all of them). Every fact position starts knowing its own fact; in each
    layer a position may take in what any position at or before it knows, provided the two share a
    chain token (Assumption 1: attention needs shared token information; our positions are random,
    so position alone tells nothing). The query knows ``c_0``. Returns the largest D such that
    ``c_D`` has reached the query after ``n_layers`` layers: never more than ``floor(3**t / 2)``.
    """
    pos = [int(p) for p in hop_pos]
    n = len(pos)
    lo, hi = list(range(n)), list(range(n))      # fact i knows facts lo[i]..hi[i]
    q_hi = -1                                   # the query knows facts 0..q_hi (tokens c_0..)
    for _ in range(int(n_layers)):
        # the query's update uses the previous layer's facts, like the facts' own updates
        share = [j for j in range(n) if lo[j] <= q_hi + 1]
        new_q = max([q_hi] + [hi[j] for j in share])
        nlo, nhi = lo[:], hi[:]
        for i in range(n):
            for j in range(n):
                if pos[j] <= pos[i] and lo[j] <= hi[i] + 1 and lo[i] <= hi[j] + 1:
                    nlo[i], nhi[i] = min(nlo[i], lo[j]), max(nhi[i], hi[j])
        lo, hi, q_hi = nlo, nhi, new_q
    return q_hi + 1


def reach(hop_pos, n_layers: int) -> np.ndarray:
    """:func:`reach_loop` for a batch ``hop_pos`` of shape ``(batch, Dmax)`` (vectorised over the
    batch). Introduced in ``02-depth-vs-difficulty``."""
    if isinstance(n_layers, bool) or int(n_layers) != n_layers or n_layers < 0:
        raise ValueError(f"n_layers must be a non-negative integer, got {n_layers!r}")
    P = np.asarray(hop_pos)
    if P.ndim != 2:
        raise ValueError(f"hop_pos must be (batch, Dmax), got shape {P.shape}")
    B, n = P.shape
    lo = np.broadcast_to(np.arange(n), (B, n)).copy()
    hi = lo.copy()
    q_hi = np.full(B, -1)
    before = P[:, None, :] <= P[:, :, None]            # [b, i, j]: j at or before i
    for _ in range(int(n_layers)):
        share_q = lo <= (q_hi[:, None] + 1)
        new_q = np.maximum(q_hi, np.where(share_q, hi, -1).max(axis=1))
        ok = before & (lo[:, None, :] <= hi[:, :, None] + 1) & (lo[:, :, None] <= hi[:, None, :] + 1)
        nlo = np.where(ok, lo[:, None, :], n).min(axis=2)
        nhi = np.where(ok, hi[:, None, :], -1).max(axis=2)
        lo, hi, q_hi = nlo, nhi, new_q
    return q_hi + 1


def binding_targets(task: RetrievalTask, X) -> tuple[np.ndarray, np.ndarray]:
    """Pair-binding targets of every fact position: what Theorem 1's flow lets a fact assemble
    in one layer.

    Introduced in ``02-depth-vs-difficulty``. A fact ``a -> b`` at position p can, in one layer
    and under the causal mask, join its *left neighbour* (the fact ``z -> a`` whose value is its
    key) and its *right neighbour* (the fact ``b -> c`` whose key is its value), if they sit at or
    before p; in the conditional variant the neighbour must also carry the same condition. The
    targets are the symbols this adds, ``z`` and ``c``, or ``task.n_symbols`` (*none*) where the
    neighbour does not exist or comes after p.

    Returns
    -------
    (left, right)
        Two ``(batch, K)`` int64 arrays over the K fact positions: ``left`` in ``0..V`` (the
        neighbour's key), ``right`` in ``0..V`` (the neighbour's value), ``V`` meaning none.
    """
    X = np.asarray(X)
    if X.ndim != 3 or X.shape[1:] != (task.seq_len, N_SLOTS):
        raise ValueError(f"X must have shape (batch, {task.seq_len}, {N_SLOTS}), got {X.shape}")
    K, V = task.n_pairs, task.n_symbols
    key, val, cond = X[:, :K, 0], X[:, :K, 1] - task.value_offset, X[:, :K, 2]
    pos = np.arange(K)
    before = (pos[None, :] <= pos[:, None])[None]                  # [., p, j]: j at or before p
    same = cond[:, :, None] == cond[:, None, :]
    left = (val[:, None, :] == key[:, :, None]) & same & before    # j's value is p's key
    right = (key[:, None, :] == val[:, :, None]) & same & before   # j's key is p's value
    rows = np.arange(len(X))[:, None]
    lt = np.where(left.any(-1), key[rows, left.argmax(-1)], V)
    rt = np.where(right.any(-1), val[rows, right.argmax(-1)], V)
    return lt.astype(np.int64), rt.astype(np.int64)


def binding_targets_loop(task: RetrievalTask, X) -> tuple[np.ndarray, np.ndarray]:
    """:func:`binding_targets` with Python loops over facts (the reference the tests use)."""
    X = np.asarray(X)
    K, V = task.n_pairs, task.n_symbols
    lt = np.full((len(X), K), V, dtype=np.int64)
    rt = np.full((len(X), K), V, dtype=np.int64)
    for b, ex in enumerate(X):
        facts = [(int(ex[p, 0]), int(ex[p, 1]) - task.value_offset, int(ex[p, 2])) for p in range(K)]
        for p, (a, v, c) in enumerate(facts):
            for j in range(p + 1):
                ka, kv, kc = facts[j]
                if kc == c and kv == a:
                    lt[b, p] = ka
                if kc == c and ka == v:
                    rt[b, p] = kv
    return lt, rt
