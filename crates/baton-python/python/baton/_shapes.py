"""The dicts llama-cpp-python returns (OpenAI's shapes), built from pieces."""

import math
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

LogprobTuple = Tuple[int, float, List[Tuple[int, float]]]


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


def usage(prompt: int, completion: int, cached: int) -> Dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def completion_choice(text: str, logprobs: Optional[Dict[str, Any]], finish: Optional[str]) -> Dict[str, Any]:
    return {"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}


def completion(cid: str, model: str, choice: Dict[str, Any], use: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    out = {"id": cid, "object": "text_completion", "created": int(time.time()), "model": model, "choices": [choice]}
    if use is not None:
        out["usage"] = use
    return out


def chat(cid: str, model: str, choice: Dict[str, Any], use: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": use,
    }


def chat_chunk(cid: str, model: str, delta: Dict[str, Any], logprobs: Any, finish: Optional[str]) -> Dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
    }


class TokenText:
    """A token's text and bytes, as logprobs entries show them."""

    def __init__(self, token_bytes):
        self._token_bytes = token_bytes

    def bytes(self, token: int) -> bytes:
        return self._token_bytes(token)

    def text(self, token: int) -> str:
        return self._token_bytes(token).decode("utf-8", errors="replace")


def completion_logprobs(
    entries: List[LogprobTuple], names: TokenText, offset: int, unscored: Optional[int] = None
) -> Dict[str, Any]:
    """The legacy completions shape: tokens, text offsets, logprobs, and a
    dict of the alternatives per token (llama-cpp-python's `logprobs=N`);
    `unscored` first, with `None`s (a prompt's first token under `echo`)."""
    tokens, offsets, values, tops = [], [], [], []
    if unscored is not None:
        text = names.text(unscored)
        tokens.append(text)
        offsets.append(offset)
        offset += len(text)
        values.append(None)
        tops.append(None)
    for token, logprob, top in entries:
        text = names.text(token)
        tokens.append(text)
        offsets.append(offset)
        offset += len(text)
        values.append(logprob)
        tops.append({names.text(t): lp for t, lp in top})
    return {"tokens": tokens, "text_offset": offsets, "token_logprobs": values, "top_logprobs": tops}


def chat_logprobs(entries: List[LogprobTuple], names: TokenText) -> Dict[str, Any]:
    """The chat shape: `content[]` with token, logprob, bytes and the most
    likely alternatives."""

    def one(token: int, logprob: float) -> Dict[str, Any]:
        return {"token": names.text(token), "logprob": logprob, "bytes": list(names.bytes(token))}

    content = []
    for token, logprob, top in entries:
        entry = one(token, logprob)
        entry["top_logprobs"] = [one(t, lp) for t, lp in top]
        content.append(entry)
    return {"content": content, "refusal": None}


def finite(x: float) -> bool:
    return not (math.isnan(x) or math.isinf(x))
