"""``llama_cpp.llama_speculative``: llama-cpp-python's prompt-lookup draft
model, accepted by ``Llama(draft_model=...)`` and said not applied (Baton
does not decode speculatively)."""

from typing import Any


class LlamaDraftModel:
    """A draft model: proposes tokens for the model to check."""

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
        raise NotImplementedError("speculative decoding is not served by Baton")


class LlamaPromptLookupDecoding(LlamaDraftModel):
    """Drafts by looking up the last n-gram earlier in the prompt."""

    def __init__(self, max_ngram_size: int = 2, num_pred_tokens: int = 10):
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens
