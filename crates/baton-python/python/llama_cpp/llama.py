"""``llama_cpp.llama``: the names llama-cpp-python's module of that name
gives, as Baton's (the package's own)."""

from . import (  # noqa: F401 - re-exported
    BaseLlamaCache,
    Llama,
    LlamaCache,
    LlamaDiskCache,
    LlamaGrammar,
    LlamaRAMCache,
    LlamaState,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
)
