"""``llama_cpp.llama_types``: llama-cpp-python's typed dicts of requests and
answers, for annotations. Baton's answers are plain dicts of the same
shapes, so every name here is ``Dict[str, Any]``."""

from typing import Any, Dict

JsonType = Any


def __getattr__(name: str) -> Any:
    if name[:1].isupper():
        return Dict[str, Any]
    raise AttributeError(f"module 'llama_cpp.llama_types' has no attribute {name!r}")
