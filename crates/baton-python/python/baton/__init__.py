"""Baton from Python.

``baton.Llama`` takes llama-cpp-python's names, defaults and result shapes,
so code written for ``llama_cpp.Llama`` runs by changing its import::

    from baton import Llama

    llm = Llama.from_known("smollm2-135m")
    out = llm("Q: Name the planets in the solar system? A: ", max_tokens=32, stop=["Q:", "\\n"])
    print(out["choices"][0]["text"])

Beyond that API: ``devices=["cpu:0", "cpu:1"]`` and ``split_mode="layer"``
or ``"tensor"`` spread a model over several devices, and ``n_parallel``
sequences share each batched step of the engine underneath.
"""

from ._baton import BatonError, DeviceError, ModelError, __version__
from .llama import Llama, known_models

__all__ = ["Llama", "known_models", "BatonError", "DeviceError", "ModelError", "__version__"]
