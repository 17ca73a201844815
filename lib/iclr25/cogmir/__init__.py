"""Chapter 03: CogMir -- social-psychology bias protocols for LLM agents, with controls.

Liu et al., *Exploring Prosocial Irrationality for LLM Agents: A Social Cognition View*
(ICLR 2025). The paper's repository ships data and prompt templates only (no code, no licence);
everything here (question banks, identities, narratives, prompts, the engine) is our own.

Modules: :mod:`.stats` (Wilson intervals, permutation tests), :mod:`.data` (banks, identities,
narratives), :mod:`.scenes` (templates, channels, trials), :mod:`.protocols` (the seven
protocols), :mod:`.discriminators` (parsing, option scoring, ratings, LLM judge, MiniLM
similarity), :mod:`.agents` (scored, chat-backend and scripted agents), :mod:`.analysis`
(rates vs control), :mod:`.rumor` (the rumour chain), :mod:`.measures` (the registered
replicates: cues against content-free controls, issue 54), :mod:`.configs` (profiles).
"""

from . import (agents, analysis, configs, data, discriminators, measures, protocols, rumor, scenes,
               stats)
from .agents import ChatAgent, Choices, ScoringAgent, ScriptedConfederate, ScriptedSubject
from .analysis import pretest, rate_table, run_trials, scripted_calibration, versus_control
from .data import IDENTITIES, MCQ, NARRATIVES, Identity, identities, known_bank, unknown_bank
from .discriminators import (LLMJudge, OptionScorer, expected_rating, parse_choice, parse_level,
                             rating_distribution, similarity_to)
from .protocols import (authority_trials, ben_franklin_trials, confirmation_trials,
                        control_trials, gambler_trials, halo_trials, herd_trials)
from .scenes import Broadcast, OneToOne, RatingTrial, Scene, Trial
from .stats import Rate, bias_rate, permutation_test, trend_test, wilson_interval
from .rumor import chain_metrics, rumor_chain, shuffled_sentence_null
