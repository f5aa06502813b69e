"""Chat messages for the model's template, and the tools of a chat: their
plan (``_ToolPlan``, read as ``baton serve`` reads ``tools`` and
``tool_choice``), earlier calls and their results written into the
conversation as the server writes them, and the calls an answer holds
shaped as llama-cpp-python's ``tool_calls``."""

import json
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ._baton import _ToolPlan


def _text(i: int, content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ValueError(f"messages[{i}]: only content parts of type 'text' are served")
            parts.append(part["text"])
        return "".join(parts)
    raise TypeError(f"messages[{i}].content must be a string, a list of parts or None")


def messages(messages: Any) -> List[Tuple[str, str]]:
    """``(role, content)`` of OpenAI-shaped messages: an assistant's
    ``tool_calls`` written after its text as the model writes a call, and
    ``tool`` results as one user turn per run of results."""
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of dicts, not {type(messages).__name__}")
    if not messages:
        raise ValueError("messages is empty")
    out: List[Tuple[str, str]] = []
    after_result = False
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TypeError(f"messages[{i}] must be a dict with role and content, not {type(m).__name__}")
        role = m.get("role")
        if not isinstance(role, str):
            raise ValueError(f"messages[{i}] has no role (a string)")
        text = _text(i, m.get("content"))
        calls = m.get("tool_calls")
        if calls:
            if role != "assistant":
                raise ValueError(f"messages[{i}]: only assistant messages carry tool_calls")
            written = _ToolPlan.written_calls(json.dumps(calls))
            text = f"{text}\n{written}" if text else written
        if role == "tool":
            result = _ToolPlan.written_result(text)
            if after_result:
                out[-1] = (out[-1][0], f"{out[-1][1]}\n{result}")
            else:
                out.append(("user", result))
            after_result = True
            continue
        after_result = False
        out.append((role, text))
    return out


def tool_plan(tools: Any, tool_choice: Any) -> Optional[_ToolPlan]:
    """The plan of ``tools`` and ``tool_choice`` (None: no call may be
    made); bad ones are a ValueError, as the server's 400."""
    if tools is None and tool_choice is None:
        return None
    try:
        tools_text = None if tools is None else json.dumps(tools)
        choice_text = None if tool_choice is None else json.dumps(tool_choice)
    except (TypeError, ValueError) as e:
        raise TypeError(f"tools and tool_choice must be JSON-shaped: {e}") from None
    return _ToolPlan.read(tools_text, choice_text, False)


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
