"""Fixtures of the core's LM tests: a tiny random Llama and its tokenizer (built in code, fast),
run on one thread; the thread count is restored afterwards so later tests are unaffected."""

import pytest
import torch

from iclr25 import lm


@pytest.fixture(scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny(one_thread):
    tok = lm.tiny_tokenizer()
    return lm.tiny_llama(len(tok)), tok
