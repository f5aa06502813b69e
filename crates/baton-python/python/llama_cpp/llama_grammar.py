"""``llama_cpp.llama_grammar``: Baton's ``LlamaGrammar``."""

from baton import LlamaGrammar
from baton._grammar import LLAMA_GRAMMAR_DEFAULT_ROOT

__all__ = ["LlamaGrammar", "LLAMA_GRAMMAR_DEFAULT_ROOT"]
