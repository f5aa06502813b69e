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

The runtime underneath is there too: ``baton.devices("cpu:0,cpu:1")``
opens devices, ``device.tensor(dtype, shape)`` and ``device.stream()``
make tensors and streams, and every queued operation (``stream.write``,
``copy``, ``scale``, ``add``, ``read``) returns at once with a ``Point``
that ``point.wait(timeout)`` or another stream's ``stream.wait(point)``
orders on (docs/contract.md)::

    import numpy as np
    d0, d1 = baton.devices("cpu:0,cpu:1", threads=1)
    s0, s1 = d0.stream(), d1.stream()
    x, y = d0.tensor("f32", [4]), d1.tensor("f32", [4])
    s0.write(x, np.arange(4, dtype=np.float32))
    done = s0.scale(x, x, 2.0)
    s1.copy(x, y, after=done)
    print(s1.read(y).wait())   # [0. 2. 4. 6.]
"""

from ._baton import (
    BatonError,
    Device,
    DeviceError,
    ModelError,
    Point,
    Read,
    Stream,
    StreamError,
    Tensor,
    __version__,
    devices,
)
from ._cache import BaseLlamaCache, LlamaCache, LlamaRAMCache, LlamaState
from ._grammar import LlamaGrammar
from ._processors import LogitsProcessorList, StoppingCriteriaList
from ._speculative import LlamaMtpDecoding
from .llama import Llama, known_models

__all__ = [
    "Llama",
    "LlamaMtpDecoding",
    "LlamaGrammar",
    "LlamaCache",
    "LlamaRAMCache",
    "BaseLlamaCache",
    "LlamaState",
    "LogitsProcessorList",
    "StoppingCriteriaList",
    "known_models",
    "devices",
    "Device",
    "Tensor",
    "Stream",
    "Point",
    "Read",
    "BatonError",
    "DeviceError",
    "ModelError",
    "StreamError",
    "__version__",
]
