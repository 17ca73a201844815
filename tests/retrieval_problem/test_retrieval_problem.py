"""Tests of chapter 11's module: the task against brute force, the theorem's table in closed form,
the hop scores and emergence times against loops, the head ablation against zeroed weights."""

import math

import numpy as np
import pytest
import torch

import iclr25.retrieval_problem as rp
from iclr25.profiles import ProfileError


# ---- Theorem 1's table -------------------------------------------------------------------------

def test_min_layers_closed_form():
    for D in range(1, 500):
        t = rp.min_layers(D)
        assert 3 ** t >= 2 * D and (t == 1 or 3 ** (t - 1) < 2 * D)
        assert t == max(1, math.ceil(math.log(2 * D, 3) - 1e-12))
    assert [rp.min_layers(D) for D in (1, 2, 4, 5, 13, 14, 40, 41)] == [1, 2, 2, 3, 3, 4, 4, 5]
    assert [rp.max_depth(t) for t in (1, 2, 3, 4)] == [1, 4, 13, 40]
    assert list(rp.min_layers(np.arange(1, 6))) == [1, 2, 2, 2, 3]
    for t in range(1, 6):  # max_depth and min_layers are inverse to each other
        assert rp.min_layers(rp.max_depth(t)) <= t < rp.min_layers(rp.max_depth(t) + 1)


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_min_layers_bad_input(bad):
    with pytest.raises(ValueError, match="positive integer"):
        rp.min_layers(bad)
    with pytest.raises(ValueError, match="positive integer"):
        rp.max_depth(bad)


def test_depth_table():
    tab = rp.depth_table(range(1, 7))
    assert list(tab["min layers t"]) == [1, 2, 2, 2, 3, 3]


# ---- the task ----------------------------------------------------------------------------------

@pytest.mark.parametrize("conditional", [False, True])
@pytest.mark.parametrize("depth", ["mixed", None, 1])
def test_samplers_agree_and_match_brute_force(conditional, depth):
    task = rp.RetrievalTask(n_symbols=20, n_chains=3, max_depth=3, conditional=conditional,
                            n_conditions=3)
    fast = task.sample(64, 5, depth=depth)
    ref = task.sample(64, 5, depth=depth, sampler="loop")
    for a, b in zip(fast, ref):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(rp.follow_chain(task, fast.X), fast.y)
    assert fast.X.shape == (64, task.seq_len, 3)
    if depth == 1:
        assert (fast.depth == 1).all()
    if depth is None:
        assert (fast.depth == 3).all()
    # hop k's fact holds (c_{k-1} -> c_k) at position hop_pos[:, k-1]
    for b in range(64):
        for k in range(3):
            p = fast.hop_pos[b, k]
            assert fast.X[b, p, 0] == fast.chain[b, k]
            assert fast.X[b, p, 1] - task.value_offset == fast.chain[b, k + 1]


def test_every_chain_is_a_distractor_of_the_same_depth():
    task = rp.RetrievalTask(n_symbols=16, n_chains=4, max_depth=3)
    b = task.sample(32, 0, depth=2)
    for ex in b.X:
        keys = ex[:-1, 0]
        vals = ex[:-1, 1] - task.value_offset
        assert len(set(keys.tolist())) == task.n_pairs          # a function
        heads = set(keys.tolist()) - set(vals.tolist())
        assert len(heads) == 4 and ex[-1, 0] in heads            # 4 chains, query at a head


def test_conditional_needs_the_condition():
    task = rp.RetrievalTask(n_symbols=16, n_chains=2, max_depth=2, conditional=True)
    b = task.sample(16, 1, depth=2)
    for ex, y in zip(b.X, b.y):
        q = ex[-1, 0]
        same_key = [p for p in range(task.n_pairs) if ex[p, 0] == q]
        assert len(same_key) == 2                                # the true fact and a decoy
        assert len({ex[p, 2] for p in same_key}) == 2            # under two conditions


def test_sampler_is_deterministic_and_seeded():
    task = rp.RetrievalTask()
    a, b, c = task.sample(8, 3), task.sample(8, 3), task.sample(8, 4)
    np.testing.assert_array_equal(a.X, b.X)
    assert not np.array_equal(a.X, c.X)


def test_task_bad_input():
    with pytest.raises(ValueError, match="n_symbols >= "):
        rp.RetrievalTask(n_symbols=8, n_chains=3, max_depth=3)
    with pytest.raises(ValueError, match="positive integer"):
        rp.RetrievalTask(n_chains=0)
    with pytest.raises(ValueError, match="n_conditions >= 2"):
        rp.RetrievalTask(conditional=True, n_conditions=1)
    task = rp.RetrievalTask()
    with pytest.raises(ValueError, match="valid: numpy, loop"):
        task.sample(4, 0, sampler="fast")
    with pytest.raises(ValueError, match="depth must be"):
        task.sample(4, 0, depth=3)
    with pytest.raises(ValueError, match="depth must be"):
        task.sample(4, 0, depth="deep")
    with pytest.raises(ValueError, match="batch_size"):
        task.sample(0, 0)
    with pytest.raises(ValueError, match="shape"):
        rp.follow_chain(task, np.zeros((2, 3, 3), dtype=int))


# ---- the model and the mechanism ---------------------------------------------------------------

def test_slot_embedding_is_the_sum_of_non_pad_slots():
    task = rp.RetrievalTask(conditional=True)
    model = rp.make_model(task, 1, d_model=32, seed=0)
    X = torch.from_numpy(task.sample(4, 0).X)
    got = model.tok_emb(X)
    W = model.tok_emb.weight.detach()
    want = torch.zeros(4, task.seq_len, 32)
    for b in range(4):
        for p in range(task.seq_len):
            for s in range(3):
                if X[b, p, s] != task.pad_id:
                    want[b, p] += W[X[b, p, s]]
    torch.testing.assert_close(got, want)
    assert model(X).shape == (4, task.seq_len, task.vocab_size)
    with pytest.raises(ValueError, match="X must have shape"):
        rp.predict(model, np.zeros((2, 5, 3), dtype=int))
    with pytest.raises(ValueError, match="positive integer"):
        rp.make_model(task, 0)


def test_attention_maps_and_hop_scores_against_a_loop():
    task = rp.RetrievalTask(n_symbols=16, n_chains=3, max_depth=2)
    model = rp.make_model(task, 2, d_model=32, n_heads=2)
    b = task.sample(10, 0)
    A = rp.attention_maps(model, b.X)
    assert A.shape == (2, 2, 10, task.seq_len, task.seq_len)
    np.testing.assert_allclose(A.sum(-1), 1.0, rtol=1e-5)
    assert np.allclose(np.triu(A, 1), 0)
    S = rp.hop_scores(A, b.hop_pos)
    Sd = rp.hop_scores(A, b.hop_pos, b.depth)
    for l in range(2):
        for h in range(2):
            for k in range(2):
                vals = [A[l, h, i, -1, b.hop_pos[i, k]] for i in range(10)]
                assert S[l, h, k] == pytest.approx(np.mean(vals))
                sel = [v for v, d in zip(vals, b.depth) if d >= k + 1]
                assert Sd[l, h, k] == pytest.approx(np.mean(sel) if sel else 0.0)
    with pytest.raises(ValueError, match="hop_pos"):
        rp.hop_scores(A, b.hop_pos[:3])


def test_emergence_times_against_a_loop():
    rng = np.random.default_rng(0)
    scores = rng.random((7, 2, 2, 3))
    steps = [0, 10, 20, 30, 40, 50, 60]
    got = rp.emergence_times(steps, scores, threshold=0.8)
    for idx in np.ndindex(2, 2, 3):
        series = scores[(slice(None),) + idx]
        want = next((s for s, v in zip(steps, series) if v >= 0.8), -1)
        assert got[idx] == want
    with pytest.raises(ValueError, match="scores must be"):
        rp.emergence_times(steps[:3], scores)


def test_ablating_a_head_equals_zeroing_its_value_weights():
    task = rp.RetrievalTask()
    model = rp.make_model(task, 2, d_model=32, n_heads=2)
    X = torch.from_numpy(task.sample(6, 0).X)
    base = model(X).detach()
    with rp.ablate_heads(model, [(1, 0)]):
        ablated = model(X).detach()
    torch.testing.assert_close(model(X).detach(), base)          # hooks removed on exit
    assert not torch.allclose(ablated, base)
    ref = rp.make_model(task, 2, d_model=32, n_heads=2)
    ref.load_state_dict(model.state_dict())
    with torch.no_grad():  # zero head 0's value projection in layer 1 (rows 2*d .. 2*d + hd)
        hd, d = 16, 32
        ref.blocks[1].attn.qkv.weight[2 * d:2 * d + hd] = 0
        ref.blocks[1].attn.qkv.bias[2 * d:2 * d + hd] = 0
    torch.testing.assert_close(ref(X).detach(), ablated)
    with pytest.raises(ValueError, match="no such head"):
        with rp.ablate_heads(model, [(2, 0)]):
            pass


def test_training_learns_one_hop():
    task = rp.RetrievalTask(n_symbols=12, n_chains=3, max_depth=1)
    model = rp.make_model(task, 1, d_model=32, n_heads=1, seed=0)
    res = rp.train_retrieval(model, task, n_steps=250, lr=5e-3, batch_size=64, eval_every=250,
                             eval_n=256, checkpoint_every=125)
    assert res.final_acc()[1] > 0.9
    assert [s for s, _ in res.checkpoints] == [0, 125, 250]
    assert res.eval_step == [0, 250]
    with pytest.raises(ValueError, match="unknown ic"):
        rp.train_retrieval(model, task, n_steps=1, ic="all")
    with pytest.raises(ValueError, match="train_depth"):
        rp.train_retrieval(model, task, n_steps=1, ic="mixed", train_depth=1)
    with pytest.raises(ValueError, match="train_depth"):
        rp.train_retrieval(model, task, n_steps=1, ic=None, train_depth=2)


def test_hop_score_history_and_heads_for_hop():
    task = rp.RetrievalTask(n_symbols=12, n_chains=2, max_depth=2)
    model = rp.make_model(task, 2, d_model=32, n_heads=2, seed=1)
    res = rp.train_retrieval(model, task, n_steps=4, checkpoint_every=2, batch_size=8)
    probe = task.sample(6, 0, depth=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    steps, scores = rp.hop_score_history(model, res.checkpoints, probe)
    assert steps == [0, 2, 4] and scores.shape == (3, 2, 2, 2)
    for k, v in model.state_dict().items():                       # weights restored
        torch.testing.assert_close(v, before[k])
    np.testing.assert_allclose(scores[-1], rp.hop_scores(rp.attention_maps(model, probe.X),
                                                         probe.hop_pos, probe.depth))
    s = np.zeros((2, 2, 2))
    s[0, 1, 0], s[1, 0, 1], s[1, 1, 1] = 0.9, 0.3, 0.1
    assert rp.heads_for_hop(s, 1) == [(0, 1)]
    assert rp.heads_for_hop(s, 2) == [(1, 0)]
    assert rp.heads_for_hop(s, 2, min_score=0.05) == [(1, 0), (1, 1)]
    with pytest.raises(ValueError, match="hop in"):
        rp.heads_for_hop(s, 3)
    with pytest.raises(ValueError, match="no checkpoints"):
        rp.hop_score_history(model, [], probe)


# ---- natural language --------------------------------------------------------------------------

def test_mc_questions():
    qs = rp.mc_questions(3, 5, seed=0)
    for q in qs:
        assert len(set(q.options)) == 4 and 0 <= q.answer < 4
        assert q.prompt.count("the mentor of") == 3
        assert q.prompt.endswith("Answer:")
    # the right option is the chain's answer: follow the sentences by hand
    q = qs[0]
    facts = dict(line[len("The mentor of "):-1].split(" is ")
                 for line in q.prompt.splitlines() if line.startswith("The mentor of "))
    cur = q.prompt.split("Who is ")[1].split("?")[0].split()[-1]
    for _ in range(3):
        cur = facts[cur]
    assert q.options[q.answer] == cur


def test_prompt_families_share_questions_and_answers():
    base = rp.mc_questions(2, 4, seed=1)
    for fam in rp.FAMILIES:
        qs = rp.mc_questions(2, 4, seed=1, family=fam)
        assert [q.options for q in qs] == [q.options for q in base]
        assert [q.answer for q in qs] == [q.answer for q in base]
    q = rp.mc_questions(3, 1, seed=2, family="code")[0]
    assert 'nxt[nxt[nxt["' in q.prompt
    assert "great-grandparent" in rp.mc_questions(3, 1, seed=2, family="relatives")[0].prompt
    # relatives: follow "B is the parent of A." by hand
    q = rp.mc_questions(2, 1, seed=3, family="relatives")[0]
    parent = {l.split(" is the parent of ")[1][:-1]: l.split(" is ")[0]
              for l in q.prompt.splitlines() if " is the parent of " in l}
    cur = q.prompt.split("grandparent of ")[1].split("?")[0]
    assert q.options[q.answer] == parent[parent[cur]]
    with pytest.raises(ValueError, match="unknown family"):
        rp.mc_questions(1, 1, family="riddles")


def test_wilson_interval_closed_form():
    lo, hi = rp.wilson_interval(5, 10)
    z = 1.96
    c = (0.5 + z * z / 20) / (1 + z * z / 10)
    h = z * math.sqrt(0.025 + z * z / 400) / (1 + z * z / 10)
    assert abs(lo - (c - h)) < 1e-12 and abs(hi - (c + h)) < 1e-12
    lo0, _ = rp.wilson_interval(0, 20)
    assert lo0 <= 1e-12
    with pytest.raises(ValueError):
        rp.wilson_interval(3, 2)


# ---- configs -----------------------------------------------------------------------------------

def test_configs():
    assert rp.depth_config("smoke").layers == (1, 2, 3)
    assert rp.depth_config("smoke", layers=[1, 3]).layers == (1, 3)
    book = rp.depth_config("book")
    assert book.max_depth >= 4 and 2 in book.layers and book.order == "composable"
    assert book.n_symbols >= book.n_chains * (book.max_depth + 1)
    with pytest.raises(ValueError, match="unknown order"):
        rp.depth_config("smoke", order="sorted")
    with pytest.raises(ValueError, match="n_noic_seeds"):
        rp.emergence_config("smoke", n_noic_seeds=5)
    with pytest.raises(ValueError, match="composed_steps"):
        rp.emergence_config("smoke", composed_steps=0)
    assert book.binding and book.ablation
    # the composed patching needs a symbol that no example uses (rp.swap_answer)
    em = rp.emergence_config("book")
    assert em.composed_symbols > em.n_chains * (4 + 1)
    with pytest.raises(ValueError, match="unknown prompt families"):
        rp.lm_config("smoke", families=("riddles",))
    with pytest.raises(ValueError, match="positive integers"):
        rp.depth_config("smoke", layers=[0, 1])
    assert rp.emergence_config("book").n_seeds >= 2
    with pytest.raises(ProfileError, match="valid"):
        rp.depth_config("smoke", n_layer=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        rp.lm_config("huge")


# ---- the composable order and Theorem 1's information flow --------------------------------------

def test_composition_ranks_small_cases():
    # D = 4 (t = 2): the query takes fact 1, then the segment 2-4 assembled at fact 3
    assert rp.composition_ranks(4).tolist() == [0, 0, 1, 0]
    assert rp.composition_ranks(1).tolist() == [0]
    r13 = rp.composition_ranks(13)
    assert r13[8] == 2 and r13[5] == 1 and r13[11] == 1 and r13[2] == 1
    with pytest.raises(ValueError, match="positive integer"):
        rp.composition_ranks(0)


@pytest.mark.parametrize("Dm", [2, 4, 5, 13])
def test_composable_sampler_agrees_with_loop_and_brute_force(Dm):
    task = rp.RetrievalTask(n_symbols=3 * (Dm + 1) + 1, n_chains=3, max_depth=Dm, order="composable")
    a, b = task.sample(40, 3), task.sample(40, 3, sampler="loop")
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(rp.follow_chain(task, a.X), a.y)
    ranks = rp.composition_ranks(Dm)
    for ex in a.hop_pos:   # within the chain, higher rank always comes later
        for i in range(Dm):
            for j in range(Dm):
                if ranks[i] < ranks[j]:
                    assert ex[i] < ex[j]
    with pytest.raises(ValueError, match="unknown order"):
        rp.RetrievalTask(order="sorted")


def _reach_brute(pos, t):
    """Theorem 1's flow by sets: each position knows a set of chain tokens (c_0..c_D)."""
    n = len(pos)
    know = [{i, i + 1} for i in range(n)]           # fact i holds tokens c_i -> c_{i+1}
    q = {0}
    for _ in range(t):
        newk = [set(s) for s in know]
        for i in range(n):
            for j in range(n):
                if pos[j] <= pos[i] and know[i] & know[j]:
                    newk[i] |= know[j]
        newq = set(q)
        for j in range(n):
            if q & know[j]:
                newq |= know[j]
        know, q = newk, newq
    D = 0
    while D + 1 in q:
        D += 1
    return D


def test_reach_against_sets_and_the_theorem():
    rng = np.random.default_rng(0)
    for _ in range(60):
        n = int(rng.integers(1, 10))
        pos = rng.permutation(20)[:n]
        for t in range(4):
            r = rp.reach(pos[None], t)[0]
            assert r == _reach_brute(list(pos), t) == rp.reach_loop(pos, t)
            assert r <= (3 ** t // 2 if t else 0)   # never beyond Theorem 1's capacity
    for Dm in (4, 13):
        task = rp.RetrievalTask(n_symbols=3 * (Dm + 1), n_chains=3, max_depth=Dm, order="composable")
        hp = task.sample(50, 1).hop_pos
        for t in (1, 2, 3):   # the composable order reaches the capacity exactly
            assert (rp.reach(hp, t) == min(Dm, rp.max_depth(t))).all()
    rnd = rp.RetrievalTask(n_symbols=20, n_chains=3, max_depth=4).sample(2000, 2).hop_pos
    frac = (rp.reach(rnd, 2) >= 4).mean()   # random order: only when fact 3 follows facts 2 and 4
    assert abs(frac - 1 / 3) < 0.04
    with pytest.raises(ValueError, match="hop_pos"):
        rp.reach(np.zeros(3), 1)


# ---- activation patching ------------------------------------------------------------------------

def _manual_patched(model, Xc, Xs, heads, pos=-1):
    """A hand-written forward of TinyGPT with per-head outputs patched at ``pos``."""
    def run(X, patch=None):
        x = model.tok_emb(X) + model.pos_emb(torch.arange(X.shape[1]))
        outs = []
        for l, blk in enumerate(model.blocks):
            h = blk.ln1(x)
            B, T, D = h.shape
            q, k, v = blk.attn.qkv(h).split(D, dim=-1)
            H, hd = model.cfg.n_heads, model.cfg.head_dim
            q, k, v = (z.view(B, T, H, hd).transpose(1, 2) for z in (q, k, v))
            s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            y = (s.softmax(-1) @ v)                                   # (B, H, T, hd)
            outs.append(y.clone())
            if patch is not None:
                rows = torch.arange(B)
                at = torch.as_tensor(np.broadcast_to(np.asarray(pos), (B,)).astype(np.int64))
                for (pl, ph) in heads:
                    if pl == l:
                        y[rows, ph, at] = patch[l][rows, ph, at]
            x = x + blk.attn.proj(y.transpose(1, 2).reshape(B, T, D))
            x = x + blk.mlp(blk.ln2(x))
        return model.head(model.ln_f(x)), outs
    with torch.no_grad():
        _, src = run(Xs)
        logits, _ = run(Xc, src)
    return logits[:, -1, :model.retrieval_task.n_symbols].argmax(-1).numpy()


def test_patch_heads_against_a_manual_forward():
    task = rp.RetrievalTask(n_symbols=12, n_chains=3, max_depth=2)
    model = rp.make_model(task, 2, d_model=32, n_heads=2, init_std=0.3, seed=1)
    b = task.sample(64, 0)
    Xs, ys = rp.swap_query(task, b)
    np.testing.assert_array_equal(rp.follow_chain(task, Xs), ys)
    assert (ys != b.y).all()
    Xc = torch.from_numpy(b.X)
    np.testing.assert_array_equal(rp.patch_heads(model, b.X, b.X, [(0, 0), (1, 1)]),
                                  rp.predict(model, b.X))
    np.testing.assert_array_equal(rp.patch_heads(model, b.X, Xs, []), rp.predict(model, b.X))
    for heads in ([(1, 0)], [(0, 1), (1, 1)], [(0, 0), (0, 1), (1, 0), (1, 1)]):
        got = rp.patch_heads(model, b.X, Xs, heads)
        np.testing.assert_array_equal(got, _manual_patched(model, Xc, torch.from_numpy(Xs), heads))
    with pytest.raises(ValueError, match="no such head"):
        rp.patch_heads(model, b.X, Xs, [(2, 0)])
    with pytest.raises(ValueError, match="same shape"):
        rp.patch_heads(model, b.X, Xs[:3], [(0, 0)])


def test_staged_curriculum_and_depth_ranges():
    assert [rp.stage_depth(s, 300, 4) for s in (0, 99, 100, 199, 200, 299)] == [2, 2, 3, 3, 4, 4]
    assert rp.stage_depth(50, 100, 2) == 2
    task = rp.RetrievalTask(n_symbols=20, n_chains=3, max_depth=4)
    b = task.sample(500, 0, depth=(2, 3))
    assert set(b.depth.tolist()) == {2, 3}
    np.testing.assert_array_equal(rp.follow_chain(task, b.X), b.y)
    with pytest.raises(ValueError, match="depth range"):
        task.sample(2, 0, depth=(0, 2))
    model = rp.make_model(task, 1, d_model=16, n_heads=1)
    res = rp.train_retrieval(model, task, n_steps=3, ic="staged", batch_size=8, eval_every=3, eval_n=8)
    assert res.eval_step == [0, 3]


# ---- pair-binding targets ----------------------------------------------------------------------

def test_binding_targets_by_hand():
    task = rp.RetrievalTask(n_symbols=12, n_chains=1, max_depth=3)
    V, off, pad = task.n_symbols, task.value_offset, task.pad_id
    # chain 5 -> 7 -> 2 -> 9 with the facts in the order (7->2), (2->9), (5->7); query 5, D=3
    X = np.array([[[7, 2 + off, pad], [2, 9 + off, pad], [5, 7 + off, pad],
                   [5, task.depth_offset + 2, pad]]])
    left, right = rp.binding_targets(task, X)
    # 7->2 is first: nothing before it; 2->9 sees its left neighbour 7->2 (key 7); 5->7 sees its
    # right neighbour 7->2 (value 2); 2->9 has no right neighbour, 5->7 no left one
    np.testing.assert_array_equal(left, [[V, 7, V]])
    np.testing.assert_array_equal(right, [[V, V, 2]])


@pytest.mark.parametrize("order,conditional", [("random", False), ("composable", False),
                                               ("random", True)])
def test_binding_targets_match_the_loop_and_the_flow(order, conditional):
    task = rp.RetrievalTask(n_symbols=24, n_chains=3, max_depth=4, order=order,
                            conditional=conditional)
    b = task.sample(64, 3)
    left, right = rp.binding_targets(task, b.X)
    lref, rref = rp.binding_targets_loop(task, b.X)
    np.testing.assert_array_equal(left, lref)
    np.testing.assert_array_equal(right, rref)
    if not conditional:
        # the query chain's facts: a fact is bound on a side exactly when the flow's first layer
        # joins that neighbour (positions of hops k-1 and k+1 at or before hop k's)
        V, P = task.n_symbols, b.hop_pos
        for k in range(task.max_depth):
            got_l = left[np.arange(64), P[:, k]] < V
            got_r = right[np.arange(64), P[:, k]] < V
            exp_l = (P[:, k - 1] < P[:, k]) if k > 0 else np.zeros(64, bool)
            exp_r = (P[:, k + 1] < P[:, k]) if k + 1 < task.max_depth else np.zeros(64, bool)
            np.testing.assert_array_equal(got_l, exp_l)
            np.testing.assert_array_equal(got_r, exp_r)
            # and the symbols are the chain's
            if k > 0:
                np.testing.assert_array_equal(left[np.arange(64), P[:, k]][exp_l],
                                              b.chain[exp_l, k - 1])
            if k + 1 < task.max_depth:
                np.testing.assert_array_equal(right[np.arange(64), P[:, k]][exp_r],
                                              b.chain[exp_r, k + 2])
    with pytest.raises(ValueError, match="shape"):
        rp.binding_targets(task, b.X[:, :-1])


def test_binding_readout_leaves_the_model_and_learns_the_targets():
    task = rp.RetrievalTask(n_symbols=12, n_chains=3, max_depth=2, order="composable")
    a = rp.make_model(task, 1, d_model=32, n_heads=2, init_std=0.2, seed=4)
    b = rp.make_model(task, 1, d_model=32, n_heads=2, init_std=0.2, seed=4)
    X = task.sample(16, 0).X
    before = rp.predict(a, X)
    readout = rp.add_binding_readout(a, seed=0)
    assert rp.add_binding_readout(a, seed=0) is readout            # idempotent
    for k, v in b.state_dict().items():                           # TinyGPT's weights untouched
        torch.testing.assert_close(a.state_dict()[k], v)
    np.testing.assert_array_equal(rp.predict(a, X), before)
    with pytest.raises(ValueError, match="binding readout"):
        rp.binding_predictions(b, X)
    with pytest.raises(ValueError, match="binding_weight"):
        rp.train_retrieval(b, task, n_steps=1, binding=True, binding_weight=-1.0)
    # one layer can bind both neighbours (Theorem 1's first step): trained with the targets only
    # (the answer loss is there too), the readout gets the bound sides right
    rp.train_retrieval(a, task, n_steps=600, lr=1e-2, batch_size=64, binding=True, seed=0)
    acc = rp.binding_accuracy(a, task, n=128)
    assert acc["left"] > 0.9 and acc["right"] > 0.9, acc
    assert acc["left bound"] > 0.85 and acc["right bound"] > 0.85, acc


def test_swap_answer_and_patching_at_per_example_positions():
    task = rp.RetrievalTask(n_symbols=16, n_chains=3, max_depth=3, order="composable")
    b = task.sample(64, 5)
    Xs, ys = rp.swap_answer(task, b)
    np.testing.assert_array_equal(rp.follow_chain(task, Xs), ys)
    assert (ys != b.y).all()
    # only the value of hop D's fact changed, to a symbol the clean example does not use
    diff = np.argwhere(Xs != b.X)
    np.testing.assert_array_equal(diff[:, 0], np.arange(64))
    np.testing.assert_array_equal(diff[:, 1], b.hop_pos[np.arange(64), b.depth - 1])
    assert (diff[:, 2] == 1).all()
    assert not ((b.X[:, :-1, :2] % task.value_offset) == ys[:, None, None]).any()
    model = rp.make_model(task, 2, d_model=32, n_heads=2, init_std=0.3, seed=2)
    where = b.hop_pos[np.arange(64), np.minimum(b.depth, 2) - 1]
    for heads in ([(0, 1)], [(0, 0), (1, 1)]):
        got = rp.patch_heads(model, b.X, Xs, heads, position=where)
        np.testing.assert_array_equal(got, _manual_patched(model, torch.from_numpy(b.X),
                                                           torch.from_numpy(Xs), heads, pos=where))
    with pytest.raises(ValueError, match="position"):
        rp.patch_heads(model, b.X, Xs, [(0, 0)], position=where[:3])
    with pytest.raises(ValueError, match="unused symbol"):
        rp.swap_answer(rp.RetrievalTask(n_symbols=9, n_chains=3, max_depth=2), b)


def test_composed_patching_against_direct_calls():
    task = rp.RetrievalTask(n_symbols=16, n_chains=3, max_depth=4, order="composable")
    model = rp.make_model(task, 2, d_model=32, n_heads=2, init_std=0.3, seed=3)
    b = task.sample(48, 7, depth=4)
    out = rp.composed_patching(model, task, b, min_mass=0.0)       # every head qualifies
    A = rp.attention_maps(model, b.X)
    ix, P = np.arange(48), b.hop_pos
    np.testing.assert_allclose(out.mass.iloc[:, 1], A[0][:, ix, P[:, 2], P[:, 3]].mean(-1))
    np.testing.assert_allclose(out.mass.iloc[:, 2], A[1][:, ix, -1, P[:, 2]].mean(-1))
    assert out.binders == [(0, 0), (0, 1)] and out.readers == [(1, 0), (1, 1)]
    assert set(out.together) == {"binding heads", "reading heads"}     # no "other" heads left
    Xs, ys = rp.swap_answer(task, b)
    direct = float((rp.patch_heads(model, b.X, Xs, [(0, 1)], position=P[:, 2]) == ys).mean())
    single = out.table.set_index(["heads", "patched at"])["answers moved to c4'"]
    assert single[("L0H1", "hop-3 fact")] == direct
    both = float((rp.patch_heads(model, b.X, Xs, [(1, 0), (1, 1)]) == ys).mean())
    assert out.together["reading heads"] == both
    assert out.clean_acc == float((rp.predict(model, b.X) == b.y).mean())
    strict = rp.composed_patching(model, task, b, min_mass=1.01)     # no head qualifies
    assert strict.binders == [] and strict.readers == []
    assert set(strict.together) == {"other layer-0 heads", "other layer-1 heads"}
    with pytest.raises(ValueError, match="depth 4"):
        rp.composed_patching(model, task, task.sample(8, 0, depth=3))
    with pytest.raises(ValueError, match="2-layer"):
        rp.composed_patching(rp.make_model(task, 1, d_model=16), task, b)
