"""``llama_cpp``: Baton in llama-cpp-python's place.

A shim shipped in Baton's wheel so that code and frameworks written for
llama-cpp-python (``from llama_cpp import Llama``: langchain-community's
``LlamaCpp``, ``ChatLlamaCpp`` and ``LlamaCppEmbeddings``, llama-index's
``LlamaCPP``) run on Baton unchanged. Its names are ``baton``'s own
classes; llama.cpp's C API (``llama_cpp.llama_*`` functions, ctypes
structures) is not here, and naming it raises AttributeError saying so.

Installing Baton's wheel beside llama-cpp-python itself would put two
packages in one ``llama_cpp`` folder: keep them in separate environments.
"""

from baton import (
    BaseLlamaCache,
    Llama,
    LlamaCache,
    LlamaGrammar,
    LlamaRAMCache,
    LlamaState,
    LogitsProcessorList,
    StoppingCriteriaList,
)
from baton import __version__ as __baton_version__
from baton._processors import LogitsProcessor, StoppingCriteria
from baton._tokens import LLAMA_DEFAULT_SEED

from . import llama_chat_format, llama_types

# The llama-cpp-python release whose Python API this shim follows.
__version__ = "0.3.36"


class LlamaDiskCache(BaseLlamaCache):
    """llama-cpp-python's cache on disk: not served (a state's keys and
    values live in host memory only); use LlamaRAMCache."""

    def __init__(self, cache_dir: str = ".cache/llama_cache", capacity_bytes: int = (2 << 30)):
        raise NotImplementedError("LlamaDiskCache is not served by Baton: use LlamaRAMCache (states in host memory)")


def __getattr__(name: str):
    if name.startswith(("llama_", "ggml_", "LLAMA_", "GGML_")):
        raise AttributeError(
            f"llama_cpp.{name} is llama.cpp's C API, which Baton's llama_cpp shim does not have: "
            "use llama_cpp.Llama (Baton's)"
        )
    raise AttributeError(f"module 'llama_cpp' (Baton's shim) has no attribute {name!r}")


__all__ = [
    "Llama",
    "LlamaGrammar",
    "LlamaCache",
    "LlamaRAMCache",
    "LlamaDiskCache",
    "BaseLlamaCache",
    "LlamaState",
    "LogitsProcessor",
    "LogitsProcessorList",
    "StoppingCriteria",
    "StoppingCriteriaList",
    "LLAMA_DEFAULT_SEED",
    "llama_chat_format",
    "llama_types",
]
