"""Saved states of a ``Llama``'s token-level sequence, and llama-cpp-python's
cache of them keyed by the tokens they hold (``LlamaRAMCache``, also named
``LlamaCache``), which completions run on the session look up by their
prompt: the state holding the longest start of it is loaded, and only the
rest is evaluated."""

from collections import OrderedDict
from typing import Any, Optional, Sequence, Tuple


def longest_token_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from their start."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class LlamaState:
    """A token-level sequence's state (``Llama.save_state``): its tokens
    (``input_ids``, the first ``n_tokens``), its logits (``scores``), the
    seed, and ``llama_state``, the keys and values of its positions copied
    into host memory (``llama_state_size`` bytes). It loads into a ``Llama``
    of the same model file only."""

    def __init__(self, input_ids: Any, scores: Any, n_tokens: int, llama_state: Any, llama_state_size: int, seed: int):
        self.input_ids = input_ids
        self.scores = scores
        self.n_tokens = n_tokens
        self.llama_state = llama_state
        self.llama_state_size = llama_state_size
        self.seed = seed

    @property
    def nbytes(self) -> int:
        """Host bytes it holds: keys and values, logits and tokens."""
        return int(self.llama_state_size) + int(self.scores.nbytes) + int(self.input_ids.nbytes)

    def __repr__(self) -> str:
        return f"LlamaState(n_tokens={self.n_tokens}, {self.nbytes} bytes)"


class BaseLlamaCache:
    """A cache of states by the tokens they hold, at most
    ``capacity_bytes`` together."""

    def __init__(self, capacity_bytes: int = (2 << 30)):
        if isinstance(capacity_bytes, bool) or not isinstance(capacity_bytes, int) or capacity_bytes < 0:
            raise ValueError(f"capacity_bytes must be an int >= 0, not {capacity_bytes!r}")
        self.capacity_bytes = capacity_bytes

    @property
    def cache_size(self) -> int:
        raise NotImplementedError

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        raise NotImplementedError

    def __contains__(self, key: Sequence[int]) -> bool:
        raise NotImplementedError

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        raise NotImplementedError


class LlamaRAMCache(BaseLlamaCache):
    """States in host memory; the least recently used go first when they
    hold more than ``capacity_bytes``."""

    def __init__(self, capacity_bytes: int = (2 << 30)):
        super().__init__(capacity_bytes)
        self.cache_state: "OrderedDict[Tuple[int, ...], LlamaState]" = OrderedDict()

    @property
    def cache_size(self) -> int:
        return sum(state.nbytes for state in self.cache_state.values())

    def _best_key(self, key: Tuple[int, ...]) -> Optional[Tuple[int, ...]]:
        best, best_len = None, 0
        for held in self.cache_state:
            shared = longest_token_prefix(held, key)
            if shared > best_len:
                best, best_len = held, shared
        return best

    def __getitem__(self, key: Sequence[int]) -> LlamaState:
        """The state sharing the longest start with ``key`` (KeyError when
        none shares a token)."""
        best = self._best_key(tuple(key))
        if best is None:
            raise KeyError("no cached state shares a token with the key")
        self.cache_state.move_to_end(best)
        return self.cache_state[best]

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._best_key(tuple(key)) is not None

    def __setitem__(self, key: Sequence[int], value: LlamaState) -> None:
        if not isinstance(value, LlamaState):
            raise TypeError(f"a cache holds LlamaState values, not {type(value).__name__}")
        key = tuple(key)
        self.cache_state.pop(key, None)
        self.cache_state[key] = value
        while self.cache_state and self.cache_size > self.capacity_bytes:
            self.cache_state.popitem(last=False)

    def __len__(self) -> int:
        return len(self.cache_state)


# llama-cpp-python's older name.
LlamaCache = LlamaRAMCache
