"""Gender bias in vision-language assistants (chapter 19).

Girrbach, Alaniz, Huang, Darrell, Akata: *Revealing and Reducing Gender Biases in Vision and
Language Assistants (VLAs)*, ICLR 2025 (https://arxiv.org/abs/2410.19314).

The paper's method as a library:

- :mod:`~iclr25.vla_gender_bias.protocol` -- prompts (question, options under letters in every
  order, instruction), letter probabilities mapped back to options, per-image aggregation, the
  bias ``Delta_v = mean_female p_yes - mean_male p_yes``, task summaries, the occupation
  correlation;
- :mod:`~iclr25.vla_gender_bias.scoring` -- batched option-letter scoring for causal LMs and
  Hugging Face VLMs (LLaVA-style), with the per-prompt ``generate(max_new_tokens=1)`` reference;
- :mod:`~iclr25.vla_gender_bias.textproxy` -- the protocol on SmolLM2 with textual persons
  (notebook 01);
- :mod:`~iclr25.vla_gender_bias.toy_vla` -- a VLA whose bias is known by construction
  (notebook 02);
- :mod:`~iclr25.vla_gender_bias.debias` -- prompt engineering, prompt tuning, LoRA, fine-tuning
  the last blocks, |grad x w| head pruning (notebook 03);
- :mod:`~iclr25.vla_gender_bias.values` -- re-authored value lists and templates.
"""

from . import configs, debias, endpoint, measures, plots, protocol, scoring, textproxy, toy_vla, values
from .protocol import (aggregate, bias_table, make_prompts, occupation_correlation, option_orders,
                       option_probs, task_summary, text_subjects)
from .scoring import score_letters, score_vlm

__all__ = ["configs", "debias", "endpoint", "measures", "plots", "protocol", "scoring", "textproxy", "toy_vla", "values",
           "aggregate", "bias_table", "make_prompts", "occupation_correlation", "option_orders",
           "option_probs", "task_summary", "text_subjects", "score_letters", "score_vlm"]
