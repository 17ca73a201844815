"""A tiny randomly initialised Llama and a tokenizer trained in code, for fast tests.

Part of the shared core (:mod:`iclr25.lm`): every piece of the LM toolkit is tested on these
(milliseconds per forward) before one test on SmolLM2; chapters' tests may use them too.
"""

from __future__ import annotations

import torch

__all__ = ["tiny_tokenizer", "tiny_llama", "CHAT_TEMPLATE"]

#: A ChatML template (SmolLM2's shape) for the tiny tokenizer.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

_CORPUS = [
    "The capital of France is Paris. The capital of Italy is Rome.",
    "A language model predicts the next token from the tokens before it.",
    "Residual streams, attention heads and MLP neurons can be read and written.",
    "Low-rank adapters train a few parameters; the rest of the model stays frozen.",
    "What is two plus two? Two plus two is four. Yes or no? Answer: yes.",
    "the quick brown fox jumps over the lazy dog 0123456789 ,.;:!?'\"()-",
]


def tiny_tokenizer(*, vocab_size: int = 384, chat_template: bool = True):
    """A byte-level BPE tokenizer trained on a few sentences (deterministic, ~50 ms).

    Part of the shared core (tests). Special tokens: ``<|endoftext|>`` (EOS and padding),
    ``<|im_start|>``, ``<|im_end|>``; with ``chat_template`` a ChatML template. No BOS token is
    added (as with SmolLM2).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tk.train_from_iterator(_CORPUS * 4, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>",
                                  pad_token="<|endoftext|>",
                                  additional_special_tokens=specials[1:])
    if chat_template:
        tok.chat_template = CHAT_TEMPLATE
    return tok


def tiny_llama(vocab_size: int = 384, *, n_layers: int = 2, d_model: int = 32, n_heads: int = 4,
               n_kv_heads: int = 2, d_ff: int = 64, seed: int = 0, eos_token_id: int | None = 0):
    """A randomly initialised ``LlamaForCausalLM`` (grouped-query attention, an untied LM head:
    with tied embeddings a random model's greedy output collapses onto one token), in eval mode,
    float32, SDPA attention.

    Part of the shared core (tests). The same seed gives the same weights.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=d_model, intermediate_size=d_ff,
                      num_hidden_layers=n_layers, num_attention_heads=n_heads,
                      num_key_value_heads=n_kv_heads, max_position_embeddings=512,
                      tie_word_embeddings=False, eos_token_id=eos_token_id, pad_token_id=eos_token_id,
                      bos_token_id=None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    model.generation_config.eos_token_id = eos_token_id
    model.generation_config.pad_token_id = eos_token_id
    model.eval()
    return model
