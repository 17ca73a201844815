"""Systematic outliers in LLMs: where they come from and what they do (chapter 13).

An, Zhao, Yu, Tang, Wang, "Systematic Outliers in Large Language Models", ICLR 2025
(arXiv:2502.06415; official code an-yongqi/systematic-outliers, MIT). The paper sorts the
outliers of LLMs into activation, weight and attention outliers, traces how a few weight
outliers of ``down_proj`` create massive activations on the first token and on delimiters, how
those tokens become attention sinks, and reads the whole system as a context-aware scaling factor
that softmax attention lacks. Give attention that scale explicitly and the outliers do not form.

Modules
-------
- :mod:`.stats`: streaming per-layer statistics inside hooks (top-k, median, mean, kurtosis,
  position and channel of the max) and the official sort-based reference;
- :mod:`.census`: token classes (initial / delimiter / weak-semantic), outlier tokens, weight
  outliers of ``down_proj`` and the alignment rates;
- :mod:`.summary`: the whole census of one model in one call (SmolLM2 and Gemma-3-270M);
- :mod:`.sinks`: attention-sink shares, attention-outlier positions, and the per-head
  correlation between sink mass and head-output norm;
- :mod:`.interventions`: set the outliers to their mean or to zero;
- :mod:`.variants`: six attention variants for :class:`iclr25.tinygpt.TinyGPT`;
- :mod:`.training`: train the variants on one budget, summarise their outliers, compress them;
- :mod:`.measures`: the replicates and controls the registered claims are judged from
  (Gaussian closed forms, chance levels from marginals, the sink knockout, per-tensor A8
  quantization with kept sites);
- :mod:`.configs`: the notebooks' runs per profile.
"""

from . import configs, measures
from .census import (TOKEN_CLASSES, WeightOutliers, classify_ids, dim_alignment, max_token_census,
                     outlier_tokens, position_alignment, token_class, weight_outliers)
from .interventions import MODES, outlier_means, reset_outliers
from .sinks import SinkStats, sink_stats
from .summary import ModelCensus, middle_layers, model_census, post_mlp_gain, spike_layer
from .stats import (SITES, ActivationStats, LayerStats, activation_stats,
                    activation_stats_reference, kurtosis, layer_blocks, token_batch)
from .training import (COMPRESSIONS, VariantRun, compress, eval_windows, gpt_perplexity,
                       outlier_summary, train_variant)
from .variants import (VARIANTS, OutlierAttention, gpt_linears, make_attention, make_gpt,
                       strip_biases)

__all__ = [
    "configs", "measures", "strip_biases", "SITES", "ActivationStats", "LayerStats", "activation_stats",
    "activation_stats_reference", "kurtosis", "layer_blocks", "token_batch", "TOKEN_CLASSES",
    "token_class", "classify_ids", "outlier_tokens", "max_token_census", "WeightOutliers",
    "weight_outliers", "dim_alignment", "position_alignment", "SinkStats", "sink_stats", "MODES",
    "outlier_means", "reset_outliers", "VARIANTS", "OutlierAttention", "make_attention",
    "make_gpt", "gpt_linears", "COMPRESSIONS", "VariantRun", "train_variant", "outlier_summary",
    "gpt_perplexity", "compress", "eval_windows", "ModelCensus", "model_census", "spike_layer",
    "middle_layers", "post_mlp_gain",
]
