"""Fixtures shared by chapter 06's tests."""

import pytest
import torch


@pytest.fixture(scope="module")
def tiny_llama():
    """A randomly initialised 3-layer Llama (hidden 16, vocab 50), seed 0, in eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                      num_attention_heads=2, num_key_value_heads=1, vocab_size=50,
                      max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()
