"""llama-cpp-python's token-level API on ``Llama``: ``eval``, ``sample``,
``generate``, ``reset``, ``n_tokens``, ``input_ids``, ``scores``,
``save_state``/``load_state`` and ``set_cache``.

These run on a session (``baton._baton._Session``): one sequence on a slot
of the engine's model kept for it, which the engine that
``create_completion`` runs on lends it between its steps, so the weights
are held once. ``create_completion`` and ``create_chat_completion`` go
through the session as well when they are given a ``logits_processor``,
``stopping_criteria``, a GBNF ``grammar`` or a ``cache``.
"""

import random
from typing import Any, Dict, Generator, List, Optional, Sequence

from . import _args
from ._baton import _Sampler, _Sampling, _Session
from ._baton import is_eog as _is_eog
from ._cache import LlamaState, longest_token_prefix

# llama.cpp's "pick a random seed" value.
LLAMA_DEFAULT_SEED = 0xFFFFFFFF


def _numpy():
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is in the test venv
        raise ImportError("Llama's token-level API (eval, scores, generate) needs numpy: pip install numpy") from None
    return numpy


def _ignored_sampling(typical_p: float, mirostat_mode: int) -> None:
    if _args.number("typical_p", typical_p) != 1.0:
        raise ValueError("typical_p is not served by Baton: only 1.0 (off)")
    if _args.integer("mirostat_mode", mirostat_mode) != 0:
        raise ValueError("mirostat sampling is not served by Baton: only mirostat_mode=0")


class TokenLevel:
    """The token-level half of ``Llama`` (a mixin: ``Llama`` sets
    ``_model``, ``logits_all``, ``last_n_tokens_size``, ``_seed`` and
    ``verbose``)."""

    _session_handle: Any = None
    _token_state: Optional[Dict[str, Any]] = None
    cache: Any = None

    # The session and what it holds.

    @property
    def _session(self):
        if self._session_handle is None:
            self._session_handle = _Session.open(self._model)
        return self._session_handle

    @property
    def _state(self) -> Dict[str, Any]:
        if self._token_state is None:
            np = _numpy()
            n_ctx, n_vocab = self._model.n_ctx, self._model.n_vocab
            self._token_state = {
                "n_tokens": 0,
                "input_ids": np.zeros(n_ctx, dtype=np.intc),
                # Every position's row with logits_all, else the last one.
                "scores": np.zeros((n_ctx if self.logits_all else 1, n_vocab), dtype=np.single),
                "requires_eval": True,
                # Tokens the last generate kept from what was evaluated.
                "reused": 0,
            }
        return self._token_state

    @property
    def n_tokens(self) -> int:
        """Tokens evaluated in the token-level sequence."""
        return self._state["n_tokens"]

    @n_tokens.setter
    def n_tokens(self, value: int) -> None:
        value = _args.integer("n_tokens", value, minimum=0)
        if value > self._state["n_tokens"]:
            raise ValueError(f"n_tokens can only go back (it is {self._state['n_tokens']}, not {value})")
        self._state["n_tokens"] = value

    @property
    def input_ids(self):
        """The evaluated tokens (an int array of ``n_ctx``; the first
        ``n_tokens`` hold them)."""
        return self._state["input_ids"]

    @input_ids.setter
    def input_ids(self, value) -> None:
        self._state["input_ids"][:] = 0
        self._state["input_ids"][: len(value)] = value

    @property
    def scores(self):
        """The logits: a row per position (``n_ctx`` rows, the first
        ``n_tokens`` filled) with ``logits_all=True``, else one row, the
        last evaluated token's."""
        return self._state["scores"]

    @property
    def _input_ids(self):
        return self.input_ids[: self.n_tokens]

    @property
    def _scores(self):
        return self.scores[: self.n_tokens] if self.logits_all else self.scores

    @property
    def eval_tokens(self):
        from collections import deque

        return deque(self._input_ids.tolist(), maxlen=self._model.n_ctx)

    @property
    def eval_logits(self):
        from collections import deque

        return deque(self._scores.tolist(), maxlen=self._model.n_ctx if self.logits_all else 1)

    def _last_row(self):
        if self.n_tokens == 0:
            raise ValueError("no token has been evaluated yet (call eval first)")
        return self.scores[self.n_tokens - 1] if self.logits_all else self.scores[0]

    # Evaluating and sampling.

    def reset(self) -> None:
        """Forgets the evaluated tokens (``n_tokens`` to 0)."""
        self._state["n_tokens"] = 0
        self._state["requires_eval"] = True

    def eval(self, tokens: Sequence[int]) -> None:
        """Evaluates ``tokens`` after the ``n_tokens`` already evaluated,
        appending them to ``input_ids`` and their logits to ``scores``
        (every row with ``logits_all``, else the last). Past ``n_ctx`` is a
        ValueError, and nothing is evaluated then."""
        np = _numpy()
        tokens = _args.token_list("tokens", tokens)
        if not tokens:
            return
        past = self.n_tokens
        raw = self._session.eval(past, tokens, self.logits_all)
        rows = np.frombuffer(raw, dtype=np.single).reshape(-1, self._model.n_vocab)
        state = self._state
        state["input_ids"][past : past + len(tokens)] = tokens
        if self.logits_all:
            state["scores"][past : past + len(tokens)] = rows
        else:
            state["scores"][0] = rows[-1]
        state["n_tokens"] = past + len(tokens)
        state["requires_eval"] = False

    def _sampling(
        self,
        temperature: float,
        top_k: int,
        top_p: float,
        min_p: float,
        repeat_penalty: float,
        frequency_penalty: float,
        presence_penalty: float,
        logit_bias: Optional[Dict[int, float]] = None,
        seed: Optional[int] = None,
    ) -> _Sampling:
        """The sampling parameters, checked (``seed`` None or -1: the
        model's seed, or a random one where that is llama.cpp's default)."""
        seed = _args.integer("seed", seed, minimum=-1, maximum=2**64 - 1, allow_none=True)
        if seed is None or seed == -1:
            seed = random.getrandbits(64) if self._seed == LLAMA_DEFAULT_SEED else self._seed
        if logit_bias is not None and not isinstance(logit_bias, dict):
            raise TypeError(f"logit_bias must be a dict of token id to bias, not {type(logit_bias).__name__}")
        bias = [
            (_args.integer("a logit_bias token", token, minimum=0), _args.number("logit_bias", value))
            for token, value in (logit_bias or {}).items()
        ]
        return _Sampling(
            _args.number("temperature", temperature),
            max(_args.integer("top_k", top_k), 0),
            _args.number("top_p", top_p),
            _args.number("min_p", min_p),
            _args.number("repeat_penalty", repeat_penalty),
            self.last_n_tokens_size,
            _args.number("presence_penalty", presence_penalty),
            _args.number("frequency_penalty", frequency_penalty),
            seed,
            bias,
        )

    def _sampler(
        self,
        top_k: int,
        top_p: float,
        min_p: float,
        temp: float,
        repeat_penalty: float,
        frequency_penalty: float,
        presence_penalty: float,
        grammar: Any = None,
        logit_bias: Optional[Dict[int, float]] = None,
        seed: Optional[int] = None,
    ) -> _Sampler:
        """A sampler of the token-level API, whose ``temp`` below 0 draws
        from the whole distribution, no filter (llama.cpp's meaning)."""
        if _args.number("temp", temp) < 0:
            temp, top_k, top_p, min_p = 1.0, 0, 1.0, 0.0
        sampling = self._sampling(
            temp, top_k, top_p, min_p, repeat_penalty, frequency_penalty, presence_penalty, logit_bias, seed
        )
        schema = grammar._schema_for_decoding() if grammar is not None else None
        return _Sampler(self._model, sampling, schema)

    def _draw(self, sampler: _Sampler, logits_processor: Any, idx: Optional[int] = None) -> int:
        if idx is None or not self.logits_all:
            row = self._last_row()
        else:
            idx = _args.integer("idx", idx, minimum=0)
            if idx >= self.n_tokens:
                raise ValueError(f"idx {idx} is not an evaluated position (n_tokens is {self.n_tokens})")
            row = self.scores[idx]
        if logits_processor is not None:
            np = _numpy()
            row = np.asarray(logits_processor(self._input_ids, row.copy()), dtype=np.single)
            if row.shape != (self._model.n_vocab,):
                raise ValueError(f"a logits_processor returned shape {row.shape}, not ({self._model.n_vocab},)")
        return sampler.sample(row.tobytes())

    def sample(
        self,
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        temp: float = 0.80,
        repeat_penalty: float = 1.0,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_eta: float = 0.1,
        mirostat_tau: float = 5.0,
        penalize_nl: bool = True,
        logits_processor: Any = None,
        grammar: Any = None,
        idx: Optional[int] = None,
    ) -> int:
        """A token drawn from the last evaluated token's logits (``idx``'s
        with ``logits_all``), after ``logits_processor``."""
        _ignored_sampling(typical_p, mirostat_mode)
        sampler = self._sampler(
            top_k, top_p, min_p, temp, repeat_penalty, frequency_penalty, presence_penalty, grammar
        )
        return self._draw(sampler, logits_processor, idx)

    def generate(
        self,
        tokens: Sequence[int],
        top_k: int = 40,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        temp: float = 0.80,
        repeat_penalty: float = 1.0,
        reset: bool = True,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        penalize_nl: bool = True,
        logits_processor: Any = None,
        stopping_criteria: Any = None,
        grammar: Any = None,
        logit_bias: Optional[Dict[int, float]] = None,
        seed: Optional[int] = None,
    ) -> Generator[int, Optional[Sequence[int]], None]:
        """Tokens drawn one at a time after ``tokens``; ``send`` a list of
        tokens to have them evaluated after the one just given. With
        ``reset``, the tokens already evaluated that start ``tokens`` are
        kept (llama-cpp-python's prefix reuse); without, ``tokens`` follow
        them. Ends when ``stopping_criteria(input_ids, logits)`` says so
        (never at an end-of-generation token: the caller stops there)."""
        _ignored_sampling(typical_p, mirostat_mode)
        sampler = self._sampler(
            top_k, top_p, min_p, temp, repeat_penalty, frequency_penalty, presence_penalty, grammar, logit_bias, seed
        )
        tokens = _args.token_list("tokens", tokens)
        return self._generate(tokens, reset, sampler, logits_processor, stopping_criteria)

    def _reuse(self, tokens: List[int]) -> List[int]:
        """Keeps the evaluated tokens that start ``tokens``; the rest of
        ``tokens`` to evaluate (at least one, so fresh logits exist)."""
        state = self._state
        state["reused"] = 0
        if self.n_tokens > 0:
            prefix = longest_token_prefix(self._input_ids.tolist(), tokens)
            if prefix == len(tokens) == self.n_tokens and not state["requires_eval"]:
                state["reused"] = prefix
                return []
            keep = prefix - 1 if prefix == len(tokens) else prefix
            if keep > 0:
                state["n_tokens"] = keep
                state["reused"] = keep
                return tokens[keep:]
        self.reset()
        return tokens

    def _generate(self, tokens, reset, sampler, logits_processor, stopping_criteria):
        if reset:
            tokens = self._reuse(tokens)
        while True:
            if tokens:
                self.eval(tokens)
            if sampler.complete:
                # The grammar's text is whole: the end of the text next.
                yield self.token_eos()
                return
            token = self._draw(sampler, logits_processor)
            sampler.accept(token)
            if stopping_criteria is not None and stopping_criteria(self._input_ids, self._last_row()):
                return
            sent = yield token
            tokens = [token] + (_args.token_list("tokens", sent) if sent is not None else [])

    def _ends_generation(self, token: int) -> bool:
        return _is_eog(self._model, token)

    # States and the cache.

    def save_state(self) -> LlamaState:
        """The token-level sequence's state: its tokens, logits and keys
        and values (a copy in host memory)."""
        np = _numpy()
        kv = self._session.save(self.n_tokens)
        return LlamaState(
            input_ids=self.input_ids.copy(),
            scores=self._scores.copy(),
            n_tokens=self.n_tokens,
            llama_state=kv,
            llama_state_size=kv.nbytes,
            seed=self._seed,
        )

    def load_state(self, state: LlamaState) -> None:
        """Puts back a state ``save_state`` gave (of a model loaded from the
        same file); one of another model is a ValueError."""
        if not isinstance(state, LlamaState):
            raise TypeError(f"load_state takes a LlamaState (from save_state), not {type(state).__name__}")
        self._session.restore(state.llama_state)
        own = self._state
        own["input_ids"][:] = 0
        own["input_ids"][: state.n_tokens] = state.input_ids[: state.n_tokens]
        n = state.n_tokens
        if self.logits_all:
            # A state saved without logits_all has its last row only.
            own["scores"][:n] = 0.0
            if len(state.scores) >= n:
                own["scores"][:n] = state.scores[:n]
            elif n > 0 and len(state.scores):
                own["scores"][n - 1] = state.scores[-1]
        elif n > 0 and len(state.scores):
            own["scores"][0] = state.scores[-1]
        own["n_tokens"] = state.n_tokens
        own["requires_eval"] = True
        self._seed = state.seed

    def set_cache(self, cache: Any) -> None:
        """The cache of states the session-run completions look up by their
        prompt and fill (``LlamaRAMCache``), or None."""
        self.cache = cache

    def set_seed(self, seed: int) -> None:
        self._seed = _args.integer("seed", seed, minimum=0, maximum=2**64 - 1)
