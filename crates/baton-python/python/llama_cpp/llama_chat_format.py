"""``llama_cpp.llama_chat_format``: what frameworks import from it.

Baton answers chats through the GGUF file's own chat template, so a
``chat_format`` that is that template's format is taken by ``Llama`` and
chat handlers are not needed. Image chat handlers (LLaVA, Moondream, ...)
are named here so imports succeed, and refuse construction: images are
not served by Baton.
"""

import dataclasses
from typing import Any, List, Optional


@dataclasses.dataclass
class ChatFormatterResponse:
    """A rendered prompt, with its stop strings (llama-cpp-python's shape)."""

    prompt: str
    stop: Optional[Any] = None
    stopping_criteria: Optional[Any] = None
    added_special: bool = False


class LlamaChatCompletionHandlerNotFoundException(Exception):
    pass


def _images_not_served(cls_name: str):
    class ImageChatHandler:
        def __init__(self, *args: Any, **kwargs: Any):
            raise NotImplementedError(f"{cls_name}: image input is not served by Baton")

    ImageChatHandler.__name__ = ImageChatHandler.__qualname__ = cls_name
    return ImageChatHandler


Llava15ChatHandler = _images_not_served("Llava15ChatHandler")
Llava16ChatHandler = _images_not_served("Llava16ChatHandler")
MoondreamChatHandler = _images_not_served("MoondreamChatHandler")
NanoLlavaChatHandler = _images_not_served("NanoLlavaChatHandler")
Llama3VisionAlphaChatHandler = _images_not_served("Llama3VisionAlphaChatHandler")
MiniCPMv26ChatHandler = _images_not_served("MiniCPMv26ChatHandler")
Qwen25VLChatHandler = _images_not_served("Qwen25VLChatHandler")


def get_chat_completion_handler(name: str):
    raise LlamaChatCompletionHandlerNotFoundException(
        f"chat handler {name!r}: Baton answers chats with the GGUF file's own template (Llama(chat_format=...) names it)"
    )


__all__: List[str] = [
    "ChatFormatterResponse",
    "LlamaChatCompletionHandlerNotFoundException",
    "get_chat_completion_handler",
    "Llava15ChatHandler",
    "Llava16ChatHandler",
    "MoondreamChatHandler",
    "NanoLlavaChatHandler",
    "Llama3VisionAlphaChatHandler",
    "MiniCPMv26ChatHandler",
    "Qwen25VLChatHandler",
]
