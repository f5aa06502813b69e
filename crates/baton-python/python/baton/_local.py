"""Completions run on the token-level session (``generate``), for what the
engine cannot do on its thread: a Python ``logits_processor`` or
``stopping_criteria`` called at every token, and a ``LlamaCache`` of
states. A run gives what an engine generation gives (``(text, logprobs)``
pieces, then ``finish_reason`` and the token counts), so the answers are
shaped by the same code."""

from typing import Any, Iterator, List, Optional, Tuple

from ._cache import longest_token_prefix


def _utf8_end(text: bytes) -> int:
    """The end of ``text``'s complete UTF-8 characters."""
    for back in range(1, min(4, len(text)) + 1):
        byte = text[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back
        need = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
        return len(text) if need <= back else len(text) - back
    return len(text)


def _held_back(text: bytes, stops: List[bytes]) -> int:
    """How many bytes at the end of ``text`` may start a stop string."""
    held = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), held, -1):
            if text.endswith(stop[:n]):
                held = n
                break
    return held


class LocalRun:
    """One completion on the session: iterating gives ``(text, [])``
    pieces (text never empty); ``finish_reason``, ``prompt_tokens``,
    ``completion_tokens`` and ``cached_tokens`` are read at the end."""

    def __init__(
        self,
        llm: Any,
        tokens: List[int],
        limit: int,
        stops: List[str],
        sampler: Any,
        logits_processor: Any,
        stopping_criteria: Any,
    ):
        self.prompt_tokens = len(tokens)
        self.completion_tokens = 0
        self.cached_tokens = 0
        self.finish_reason: Optional[str] = None
        self._pieces = self._run(llm, tokens, limit, [s.encode("utf-8") for s in stops], sampler, logits_processor, stopping_criteria)

    def __iter__(self) -> "LocalRun":
        return self

    def __next__(self) -> Tuple[str, list]:
        return next(self._pieces)

    def trailing_logprobs(self) -> list:
        return []

    def cancel(self) -> None:
        self._pieces.close()
        if self.finish_reason is None:
            self.finish_reason = "cancelled"

    def _run(self, llm, tokens, limit, stops, sampler, logits_processor, stopping_criteria) -> Iterator[Tuple[str, list]]:
        cache = llm.cache
        if cache is not None:
            try:
                state = cache[tokens]
            except KeyError:
                state = None
            if state is not None:
                held = longest_token_prefix(state.input_ids[: state.n_tokens].tolist(), tokens)
                if held > longest_token_prefix(llm._input_ids.tolist(), tokens):
                    llm.load_state(state)
        completion: List[int] = []
        sent = 0
        finish = "stop"  # the generator ending on its own: stopping_criteria
        text = b""
        steps = llm._generate(list(tokens), True, sampler, logits_processor, stopping_criteria)
        try:
            for token in steps:
                if llm._ends_generation(token):
                    finish = "stop"
                    break
                completion.append(token)
                self.completion_tokens = len(completion)
                text = llm.detokenize(completion)
                cuts = [text.find(s) for s in stops if s in text]
                if cuts:
                    text = text[: min(cuts)]
                    finish = "stop"
                    break
                if len(completion) >= limit:
                    finish = "length"
                    break
                end = _utf8_end(text[: len(text) - _held_back(text, stops)])
                if end > sent:
                    yield text[sent:end].decode("utf-8", errors="replace"), []
                    sent = end
        finally:
            steps.close()
        self.finish_reason = finish
        self.cached_tokens = llm._state["reused"]
        if len(text) > sent:
            yield text[sent:].decode("utf-8", errors="replace"), []
        if cache is not None:
            cache[tokens + completion] = llm.save_state()
