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


# ---- configs -----------------------------------------------------------------------------------

def test_configs():
    assert rp.depth_config("smoke").layers == (1, 2)
    assert rp.depth_config("smoke", layers=[1, 3]).layers == (1, 3)
    assert rp.depth_config("smoke", layers=[1, 3]).noic_layers == ()   # (2,) is not trained
    assert rp.depth_config("book").noic_layers == (2,)
    with pytest.raises(ValueError, match="positive integers"):
        rp.depth_config("smoke", layers=[0, 1])
    assert rp.emergence_config("book").n_seeds >= 2
    with pytest.raises(ProfileError, match="valid"):
        rp.depth_config("smoke", n_layer=3)
    with pytest.raises(ProfileError, match="valid profiles"):
        rp.lm_config("huge")
