"""Cybench (chapter 07): capture-the-flag tasks, subtasks and agents, in a sandbox.

Zhang et al., "Cybench: A Framework for Evaluating Cybersecurity Capabilities and Risks of
Language Models", ICLR 2025. The book's version of the framework:

- :mod:`~iclr25.cybench.task`: the task specification (description, starter files, flag,
  subtasks with questions and answers, category, first-solve time);
- :mod:`~iclr25.cybench.tasks`: 17 small original toy tasks, each with a reference solution;
- :mod:`~iclr25.cybench.sandbox`: bubblewrap (or unshare) namespaces with resource limits;
- :mod:`~iclr25.cybench.agents`: the LM agent (structured bash, action-only) over any
  :mod:`iclr25.chat` backend, and graded scripted replay agents;
- :mod:`~iclr25.cybench.runner`: unguided and subtask-guided runs, batched, with a JSONL log;
- :mod:`~iclr25.cybench.metrics`: the paper's metrics;
- :mod:`~iclr25.cybench.paper_data`: the published tables as cited data.
"""

from . import configs, escapes, experiments, metrics, paper_data
from .agents import (DISTRACTORS, SCAFFOLDS, Action, LMAgent, ReplayAgent, parse_action,
                     system_prompt, truncate_middle)
from .runner import MODES, Episode, Memo, check_reference, run_episodes
from .sandbox import (BACKENDS, ExecResult, Limits, Sandbox, SandboxError, available_backends,
                      bwrap_path)
from .task import CATEGORIES, Subtask, Task
from .tasks import all_tasks, get_task, task_names

__all__ = ["Task", "Subtask", "CATEGORIES", "all_tasks", "get_task", "task_names", "Sandbox",
           "Limits", "ExecResult", "SandboxError", "available_backends", "bwrap_path",
           "BACKENDS", "LMAgent", "ReplayAgent", "Action", "parse_action", "truncate_middle",
           "system_prompt", "SCAFFOLDS", "DISTRACTORS", "Episode", "run_episodes", "Memo",
           "check_reference", "MODES", "metrics", "paper_data", "configs", "escapes", "experiments"]
