"""The dicts llama-cpp-python returns (OpenAI's shapes): built in Rust by
the same code as ``baton serve``'s JSON (baton-gen's ``openai``), so the
two agree key for key. Only the request's id and time are made here."""

import time
import uuid

from ._baton import _Answers, _Model


def answers(model: _Model, chat: bool, name: str) -> _Answers:
    """The answers of a new chat (``chat``) or completion request."""
    prefix = "chatcmpl" if chat else "cmpl"
    return _Answers(model, chat, f"{prefix}-{uuid.uuid4()}", int(time.time()), name)
