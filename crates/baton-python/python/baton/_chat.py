"""A chat's request for the model's template (rendered by ``_Model.chat``
as ``baton serve`` renders it: earlier calls and their results in the
template's own form, the tools' plan in the model's call format), and the
calls an answer holds shaped as llama-cpp-python's ``tool_calls``."""

import json
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ._baton import _ToolPlan


def request(messages: Any, tools: Any, tool_choice: Any, response_format: Optional[str] = None) -> str:
    """The JSON text of a chat completions request of ``messages`` (OpenAI's
    shapes: an assistant's ``tool_calls``, ``tool`` results with their
    ``tool_call_id``, ``reasoning_content``), ``tools`` and ``tool_choice``,
    one call per answer, ending with the generation prompt as
    llama-cpp-python's chat handlers end it: what ``_Model.chat`` renders
    as ``baton serve`` renders it. Shapes that are not JSON or not lists
    of dicts with a role are a TypeError or ValueError here; the rest is
    checked where the server checks it."""
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of dicts, not {type(messages).__name__}")
    if not messages:
        raise ValueError("messages is empty")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TypeError(f"messages[{i}] must be a dict with role and content, not {type(m).__name__}")
        if not isinstance(m.get("role"), str):
            raise ValueError(f"messages[{i}] has no role (a string)")
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list, tuple)):
            raise TypeError(f"messages[{i}].content must be a string, a list of parts or None")
    body: Dict[str, Any] = {
        "messages": list(messages),
        "parallel_tool_calls": False,
        "add_generation_prompt": True,
    }
    if tools is not None:
        body["tools"] = tools
    if tool_choice is not None:
        body["tool_choice"] = tool_choice
    if response_format is not None:
        body["response_format"] = json.loads(response_format)
    try:
        return json.dumps(body)
    except (TypeError, ValueError) as e:
        raise TypeError(f"messages, tools and tool_choice must be JSON-shaped: {e}") from None


def tool_calls(plan: _ToolPlan, text: str) -> Optional[List[Dict[str, Any]]]:
    """The answer's calls as ``tool_calls`` entries, if it is calls."""
    calls = plan.read_calls(text)
    if not calls:
        return None
    return [
        {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function", "function": {"name": name, "arguments": arguments}}
        for name, arguments in calls
    ]


def as_calls(answer: Dict[str, Any], calls: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A whole chat answer made the calls it holds."""
    choice = answer["choices"][0]
    choice["message"] = {"role": "assistant", "content": None, "tool_calls": calls}
    choice["finish_reason"] = "tool_calls"
    return answer


def call_chunks(opening: Dict[str, Any], last: Dict[str, Any], calls: List[Dict[str, Any]]):
    """A streamed answer's chunks for its calls: the role, one chunk per
    call (with its index), and the end."""
    yield opening
    for index, call in enumerate(calls):
        chunk = json.loads(json.dumps(last))
        chunk["choices"][0]["delta"] = {"tool_calls": [dict(call, index=index)]}
        chunk["choices"][0]["finish_reason"] = None
        yield chunk
    last["choices"][0]["finish_reason"] = "tool_calls"
    last["choices"][0]["delta"] = {}
    yield last


def legacy_functions(functions: Any, function_call: Any) -> Tuple[Any, Any]:
    """OpenAI's legacy ``functions`` and ``function_call`` as ``tools`` and
    ``tool_choice``."""
    if functions is not None and not isinstance(functions, list):
        raise TypeError("functions must be a list of {'name': ..., 'parameters': {...}}")
    tools = None if functions is None else [{"type": "function", "function": f} for f in functions]
    if isinstance(function_call, dict):
        choice: Any = {"type": "function", "function": {"name": function_call.get("name")}}
    else:
        choice = function_call
    return tools, choice
