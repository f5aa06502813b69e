"""``llama_cpp.llama_cache``: Baton's caches of states."""

from baton import BaseLlamaCache, LlamaCache, LlamaRAMCache

from . import LlamaDiskCache

__all__ = ["BaseLlamaCache", "LlamaCache", "LlamaRAMCache", "LlamaDiskCache"]
