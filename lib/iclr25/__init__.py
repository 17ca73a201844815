"""iclr25: the library behind *iclr25-book*, an executable book of 19 ICLR 2025 papers.

The shared core (used by every chapter):

- :mod:`iclr25.profiles` -- the ``smoke`` / ``book`` / ``paper`` scales and config dataclasses;
- :mod:`iclr25.claims` -- a paper's claims as checks that can fail, saved for the scorecard;
- :mod:`iclr25.progress` -- progress bars the HTML build can switch off;
- :mod:`iclr25.plotting` -- the house style and figures titled with the paper figure they reproduce;
- :mod:`iclr25.lm` -- offline language models (SmolLM2-135M-Instruct) with activation hooks;
- :mod:`iclr25.tinygpt` -- a small GPT and an offline English corpus for chapters that train from scratch;
- :mod:`iclr25.batch` / :mod:`iclr25.cli` -- ``iclr25 run``, ``iclr25 sweep``, ``iclr25 list``,
  ``iclr25 scorecard``; :mod:`iclr25.scorecard` builds the claims tables they and the book show;
- :mod:`iclr25.chapters` -- the 19 chapters (slug, module, paper);
- :mod:`iclr25.sphinxext` -- the book's Sphinx extension (offline MathJax, results directives).

One subpackage per paper holds the method, e.g. :mod:`iclr25.relu_landscape` (chapter 18).
"""

__version__ = "0.1.0"
