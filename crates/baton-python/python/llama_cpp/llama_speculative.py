"""``llama_cpp.llama_speculative``: llama-cpp-python's prompt-lookup draft
model. ``Llama(draft_model=LlamaPromptLookupDecoding(...))`` decodes with
n-gram drafts verified in one step (Baton's exact speculative decoding:
the same tokens as without drafts, only faster where the text repeats)."""

from typing import Any


class LlamaDraftModel:
    """A draft model: proposes tokens for the model to check."""

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
        raise NotImplementedError("Baton drafts inside its engine; a draft model is not called from Python")


class LlamaPromptLookupDecoding(LlamaDraftModel):
    """Drafts by looking up the last n-gram (at most ``max_ngram_size``
    tokens) earlier in the text, proposing at most ``num_pred_tokens``."""

    def __init__(self, max_ngram_size: int = 2, num_pred_tokens: int = 10):
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens
