"""Baton's own draft model for ``Llama(draft_model=...)``, beside
llama-cpp-python's ``LlamaPromptLookupDecoding``: the model's own
multi-token-prediction head drafts (``baton serve --spec-type mtp``)."""

from typing import Any


class LlamaMtpDecoding:
    """Drafts with the model file's own multi-token-prediction block (Qwen
    3.5 files that hold one; a file without is refused when the model
    loads), proposing at most ``num_pred_tokens`` a step. The drafts are
    verified in one step, each row drawn as plain decoding draws it: the
    tokens are those without drafts."""

    def __init__(self, num_pred_tokens: int = 4):
        self.num_pred_tokens = num_pred_tokens

    def __repr__(self) -> str:
        return f"LlamaMtpDecoding(num_pred_tokens={self.num_pred_tokens!r})"

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
        raise NotImplementedError("Baton drafts inside its engine; a draft model is not called from Python")
