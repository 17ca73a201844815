"""PhyloLM (chapter 12): phylogenies of language models from their outputs."""
from . import nei, trees
