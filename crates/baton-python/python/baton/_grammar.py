"""``LlamaGrammar``: what a generation's text must be.

``from_json_schema`` and ``from_string`` (GBNF, llama.cpp's format) hold
decoding to the text they accept, through the grammar engine the server
uses (llguidance): a JSON text the schema accepts (with the server's
defaults: no undeclared keys, integers of at most 16 digits), or a text
of the grammar.
"""

import json
import os
from typing import Any, Optional, Union

from ._baton import _Schema

LLAMA_GRAMMAR_DEFAULT_ROOT = "root"


class LlamaGrammar:
    """A grammar: a JSON schema (``from_json_schema``) or GBNF text
    (``from_string``, ``from_file``)."""

    def __init__(self, *args: Any, _grammar: Optional[str] = None, _schema: Optional[str] = None, **kwargs: Any):
        if (_grammar is None) == (_schema is None):
            raise TypeError("LlamaGrammar is made by from_string, from_file or from_json_schema")
        self._grammar = _grammar
        self._schema = _schema
        self._compiled = _Schema(_schema) if _schema is not None else _Schema.gbnf(_grammar)
        self._root = LLAMA_GRAMMAR_DEFAULT_ROOT

    @classmethod
    def from_string(cls, grammar: str, verbose: bool = True) -> "LlamaGrammar":
        """A GBNF grammar; one that does not read is a ValueError naming
        the line and the problem."""
        if not isinstance(grammar, str):
            raise TypeError(f"grammar must be GBNF text (a str), not {type(grammar).__name__}")
        if not grammar.strip():
            raise ValueError("the grammar is empty")
        return cls(_grammar=grammar)

    @classmethod
    def from_file(cls, file: Union[str, "os.PathLike[str]"], verbose: bool = True) -> "LlamaGrammar":
        """A GBNF grammar read from ``file``."""
        with open(file, encoding="utf-8") as f:
            return cls.from_string(f.read(), verbose=verbose)

    @classmethod
    def from_json_schema(cls, json_schema: Union[str, dict], verbose: bool = True) -> "LlamaGrammar":
        """A JSON schema (its JSON text, or a dict): decoding is held to a
        JSON text the schema accepts. A schema the reader cannot hold
        decoding to is a ValueError now, naming what."""
        if isinstance(json_schema, dict):
            json_schema = json.dumps(json_schema)
        if not isinstance(json_schema, str):
            raise TypeError(f"json_schema must be a JSON text or a dict, not {type(json_schema).__name__}")
        return cls(_schema=json_schema)

    @property
    def schema(self) -> Optional[dict]:
        """The JSON schema, for a grammar made from one."""
        return None if self._schema is None else json.loads(self._schema)

    def _schema_for_decoding(self) -> "_Schema":
        return self._compiled

    def _response_format(self) -> str:
        """The grammar as the engine's ``response_format`` (JSON text)."""
        if self._schema is None:
            return json.dumps({"type": "gbnf", "grammar": self._grammar})
        return json.dumps({"type": "json_schema", "json_schema": {"schema": json.loads(self._schema)}})

    def __repr__(self) -> str:
        return f"LlamaGrammar(json_schema={self._schema!r})" if self._schema else "LlamaGrammar(gbnf)"
