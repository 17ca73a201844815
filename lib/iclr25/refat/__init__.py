"""ReFAT: refusal feature adversarial training (Yu, Do, Hambardzumyan, Cancedda; ICLR 2025).
Chapter 08 of the book.
"""
from .data import *  # noqa: F401,F403
from .features import *  # noqa: F401,F403
from .judges import *  # noqa: F401,F403
from .attacks import *  # noqa: F401,F403
from .training import *  # noqa: F401,F403
from .measures import *  # noqa: F401,F403
from . import configs, pipeline  # noqa: F401
from .pipeline import (adapters_off, aligned_model, cached_feature, gcg_suffixes,  # noqa: F401
                       model_feature, refusal_eval, reset_to_sft, robustness_eval)
