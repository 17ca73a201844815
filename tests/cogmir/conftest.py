"""Fixtures of chapter 03's tests: a tiny random Llama (built in code) on one thread."""

import pytest
import torch

from iclr25 import lm


@pytest.fixture(scope="module")
def tiny():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    tok = lm.tiny_tokenizer()
    yield lm.tiny_llama(len(tok)), tok
    torch.set_num_threads(before)
