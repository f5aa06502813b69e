"""``Llama``: llama-cpp-python's class, over Baton's engine."""

import json
import os
import sys
import time
import types
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _args, _chat, _compat, _shapes
from ._baton import _Answers, _Generation, _Model
from ._baton import device_list as _device_list
from ._cache import longest_token_prefix
from ._grammar import LlamaGrammar
from ._local import LocalRun
from ._tokens import LLAMA_DEFAULT_SEED, TokenLevel

_CACHE_TYPES = ("f16", "f32", "bf16", "q8_0", "q4_0")


def known_models() -> List[str]:
    """The names ``Llama.from_known`` takes (``baton model list``)."""
    return _Model.known()


class Llama(TokenLevel):
    """A GGUF model loaded for generation, with llama-cpp-python's API.

    ``model_path`` is a GGUF file. ``n_ctx`` is the positions of one
    sequence (0: the model's trained context), ``n_batch`` the most prompt
    tokens one step reads, ``n_threads`` the threads of each CPU device
    (``None``: all cores). Baton's own: ``devices`` (``["cpu"]``,
    ``["cpu:0", "cpu:1"]``, ``["vulkan:0"]``), ``split_mode`` (``"layer"``,
    ``"tensor"``, ``"expert"``: a mixture's experts shared by the devices,
    or ``"none"``), ``tensor_split`` (each device's share),
    ``n_parallel`` (sequences the engine batches at once; calls from
    several Python threads share its steps), ``type_k``/``type_v`` (the KV
    cache's types: f16, f32, bf16, q8_0, q4_0), ``pooling`` (how ``embed``
    pools a text's hidden states: ``"mean"`` or ``"last"``). ``embedding``
    is taken for llama-cpp-python's signature: any model embeds.

    Every keyword argument of llama-cpp-python 0.3's ``Llama`` is taken.
    Applied: ``n_ctx``, ``n_batch`` and ``n_ubatch`` (the smaller is
    Baton's batch), ``n_threads`` (``n_threads_batch`` where it is None),
    ``seed``, ``verbose``, ``split_mode`` and ``type_k``/``type_v`` as
    llama.cpp's numbers too, ``pooling_type`` (mean, last),
    ``last_n_tokens_size`` (the repeat penalty's window), ``logits_all``
    (logprobs need nothing more), ``chat_format`` where the GGUF file's
    template is that format, and ``n_gpu_layers``: nonzero places the
    model on a Vulkan GPU (``main_gpu``; several by ``tensor_split``) where
    there is one, whole (Baton does not split a model by a layer count),
    else it runs on the CPU. What cannot apply is accepted and said once,
    in one ``UserWarning`` and in ``verbose`` output, and listed in
    ``self.unapplied``; ``from_pretrained`` raises NotImplementedError.
    """

    def __init__(
        self,
        model_path: Union[str, "os.PathLike[str]"],
        *,
        # llama-cpp-python 0.3's keyword arguments, in its order.
        n_gpu_layers: int = 0,
        split_mode: Union[int, str] = "layer",
        main_gpu: int = 0,
        tensor_split: Optional[Sequence[float]] = None,
        vocab_only: bool = False,
        use_mmap: bool = True,
        use_mlock: bool = False,
        kv_overrides: Optional[Dict[str, Any]] = None,
        seed: int = LLAMA_DEFAULT_SEED,
        n_ctx: int = 512,
        n_batch: int = 512,
        n_ubatch: int = 512,
        n_threads: Optional[int] = None,
        n_threads_batch: Optional[int] = None,
        rope_scaling_type: Optional[int] = -1,
        pooling_type: int = -1,
        attention_type: int = -1,
        rope_freq_base: float = 0.0,
        rope_freq_scale: float = 0.0,
        yarn_ext_factor: float = -1.0,
        yarn_attn_factor: float = 1.0,
        yarn_beta_fast: float = 32.0,
        yarn_beta_slow: float = 1.0,
        yarn_orig_ctx: int = 0,
        logits_all: bool = False,
        embedding: bool = False,
        offload_kqv: bool = True,
        flash_attn: bool = False,
        op_offload: Optional[bool] = None,
        swa_full: Optional[bool] = None,
        no_perf: bool = False,
        last_n_tokens_size: int = 64,
        lora_base: Optional[str] = None,
        lora_scale: float = 1.0,
        lora_path: Optional[str] = None,
        numa: Union[bool, int] = False,
        chat_format: Optional[str] = None,
        chat_handler: Any = None,
        draft_model: Any = None,
        tokenizer: Any = None,
        type_k: Union[None, int, str] = None,
        type_v: Union[None, int, str] = None,
        spm_infill: bool = False,
        verbose: bool = True,
        # Older llama-cpp-python releases' (langchain-community passes them).
        n_parts: int = -1,
        f16_kv: bool = True,
        device: Optional[str] = None,
        # Baton's own.
        devices: Union[None, str, Sequence[str]] = None,
        n_parallel: int = 1,
        pooling: str = "mean",
    ) -> None:
        if not isinstance(model_path, (str, os.PathLike)):
            raise TypeError(f"model_path must be a path, not {type(model_path).__name__}")
        notes = _compat.not_applied(dict(locals()))
        n_ctx = _args.integer("n_ctx", n_ctx, minimum=0)
        n_batch = _args.integer("n_batch", n_batch, minimum=1)
        # llama.cpp's physical batch is at most n_batch; Baton's one batch
        # size is the most tokens one step reads.
        n_batch = min(n_batch, _args.integer("n_ubatch", n_ubatch, minimum=1))
        n_threads = _args.integer("n_threads", n_threads, minimum=1, allow_none=True)
        n_threads_batch = _args.integer("n_threads_batch", n_threads_batch, minimum=1, allow_none=True)
        if n_threads is None:
            n_threads = n_threads_batch
        elif n_threads_batch is not None and n_threads_batch != n_threads:
            notes.append(f"n_threads_batch={n_threads_batch} is not applied: Baton's CPU devices use n_threads={n_threads} for prompts too")
        n_parallel = _args.integer("n_parallel", n_parallel, minimum=1)
        n_gpu_layers = _args.integer("n_gpu_layers", n_gpu_layers, minimum=-1)
        main_gpu = _args.integer("main_gpu", main_gpu, minimum=0)
        self.last_n_tokens_size = _args.integer("last_n_tokens_size", last_n_tokens_size, minimum=0)
        seed = _args.integer("seed", seed, minimum=-1, maximum=2**64 - 1)
        self._seed = LLAMA_DEFAULT_SEED if seed == -1 else seed
        split_mode = _compat.split_mode(split_mode)
        if not isinstance(split_mode, str):
            raise TypeError(f"split_mode must be a string or llama.cpp's 0, 1, 2, not {split_mode!r}")
        type_k = _compat.cache_type("type_k", type_k, notes)
        type_v = _compat.cache_type("type_v", type_v, notes)
        for name, value in (("type_k", type_k), ("type_v", type_v)):
            if value not in _CACHE_TYPES:
                raise ValueError(f"{name} must be one of {', '.join(_CACHE_TYPES)}, not {value!r}")
        pooling = _compat.pooling(pooling, pooling_type, notes)
        if pooling not in ("mean", "last"):
            raise ValueError(f"pooling must be 'mean' or 'last', not {pooling!r}")
        if devices is None:
            # llama.cpp leaves Vulkan devices that run on the CPU (lavapipe)
            # out unless asked; so does n_gpu_layers here.
            gpus = []
            if n_gpu_layers != 0:
                gpus = [name for name, _, what in _device_list("vulkan") if not what.endswith("(CPU)")]
            chosen, tensor_split = _compat.gpu_devices(n_gpu_layers, main_gpu, tensor_split, gpus, notes)
            devices = chosen
        elif n_gpu_layers != 0:
            notes.append(f"n_gpu_layers={n_gpu_layers} is not applied: devices={devices!r} places the model")
        shares = [_args.number("tensor_split", w) for w in (tensor_split or [])]
        self._draft = _compat.draft(draft_model, notes)
        self.chat_format = chat_format
        self.pooling = pooling
        self.model_path = os.fspath(model_path)
        self.verbose = bool(verbose)
        self.n_gpu_layers = n_gpu_layers
        self.logits_all = bool(logits_all)
        self.embedding = bool(embedding)
        self.devices = _args.devices(devices)
        start = time.perf_counter()
        self._model = _Model.load(
            self.model_path,
            n_ctx,
            n_threads,
            n_batch,
            self.devices,
            split_mode,
            shares,
            n_parallel,
            type_k,
            type_v,
            self._draft,
        )
        self.n_batch = n_batch
        self.n_threads = n_threads
        # llama-cpp-python's llama_context_params, the fields frameworks
        # read (llama-index's LlamaCPP reads n_ctx).
        self.context_params = types.SimpleNamespace(
            n_ctx=self._model.n_ctx, n_batch=n_batch, n_ubatch=n_batch, n_threads=n_threads,
            n_threads_batch=n_threads, embeddings=self.embedding,
        )
        if chat_format is not None and not _chat_format_maps(chat_format, self._model.chat_template):
            notes.append(
                f"chat_format={chat_format!r} is not applied: the GGUF file's own chat template answers chats"
            )
        # Said once: every setting accepted but not applied, together.
        self.unapplied: List[str] = notes
        if notes:
            warnings.warn("baton.Llama: " + "; ".join(notes), UserWarning, stacklevel=2)
        if self.verbose:
            print(
                f"baton: loaded {self.model_path} in {time.perf_counter() - start:.2f} s "
                f"(context {self._model.n_ctx}, batch {n_batch}, devices {self.devices}, split {split_mode}, "
                f"n_gpu_layers {n_gpu_layers}, cache {type_k}/{type_v})",
                file=sys.stderr,
            )
            for note in notes:
                print(f"baton: {note}", file=sys.stderr)

    @classmethod
    def from_pretrained(cls, repo_id: str, filename: Optional[str] = None, *args: Any, **kwargs: Any) -> "Llama":
        """llama-cpp-python's download from the Hugging Face Hub: not served
        (Baton does not reach a model hub). Raises NotImplementedError."""
        raise NotImplementedError(
            f"Llama.from_pretrained({repo_id!r}, ...) downloads from the Hugging Face Hub, which Baton does not do: "
            "download the GGUF file yourself and pass Llama(model_path=...), "
            f"or use Llama.from_known(name) for {', '.join(_Model.known())}"
        )

    @classmethod
    def from_known(cls, name: str, **kwargs: Any) -> "Llama":
        """Loads a known model by name (``smollm2-135m``, ``gemma3-270m``),
        fetched into Baton's cache on first use as ``baton model fetch``
        does."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, not {type(name).__name__}")
        if name not in _Model.known():
            raise ValueError(f"unknown model {name!r}: the known models are {', '.join(_Model.known())}")
        return cls(_Model.resolve(name), **kwargs)

    # The model's figures and tokens.

    def n_ctx(self) -> int:
        return self._model.n_ctx

    def n_vocab(self) -> int:
        return self._model.n_vocab

    def n_embd(self) -> int:
        """The hidden size (an embedding's width)."""
        return self._model.n_embd

    def token_nl(self) -> int:
        """The token of a line feed (-1 where it is not one token)."""
        tokens = self.tokenize(b"\n", add_bos=False, special=False)
        return tokens[0] if len(tokens) == 1 else -1

    def pooling_type(self) -> int:
        """How ``embed`` pools, as llama.cpp's number (1 mean, 3 last)."""
        return {"mean": 1, "last": 3}[self.pooling]

    def tokenizer(self) -> "LlamaTokenizer":
        """The model's tokenizer, as llama-cpp-python's ``LlamaTokenizer``."""
        return LlamaTokenizer(self)

    longest_token_prefix = staticmethod(longest_token_prefix)

    @staticmethod
    def logits_to_logprobs(logits: Any, axis: int = -1) -> Any:
        """Log-probabilities of logits along ``axis`` (a log-softmax, in
        float32; rows of minus infinity stay minus infinity)."""
        import numpy as np

        logits = np.asarray(logits, dtype=np.single)
        top = np.amax(logits, axis=axis, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0).astype(np.single)
        shifted = logits - top
        with np.errstate(divide="ignore"):
            return (shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).astype(np.single)

    def token_bos(self) -> int:
        return -1 if self._model.bos is None else self._model.bos

    def token_eos(self) -> int:
        return -1 if self._model.eos is None else self._model.eos

    @property
    def chat_template(self) -> str:
        return self._model.chat_template

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        """Token ids of UTF-8 ``text`` (a ``str`` is taken too)."""
        if isinstance(text, str):
            text = text.encode("utf-8")
        if not isinstance(text, (bytes, bytearray)):
            raise TypeError(f"text must be bytes or str, not {type(text).__name__}")
        return self._model.tokenize(bytes(text), bool(add_bos), bool(special))

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None, special: bool = False) -> bytes:
        """The UTF-8 text of ``tokens`` (``prev_tokens`` is accepted for
        llama-cpp-python's signature; the text does not depend on it)."""
        return self._model.detokenize(_args.token_list("tokens", tokens), bool(special))

    # Generation.

    def _prompt_tokens(self, prompt: Union[str, bytes, Sequence[int]]) -> List[int]:
        if isinstance(prompt, (str, bytes)):
            tokens = self.tokenize(prompt, add_bos=True, special=True)
        else:
            tokens = _args.token_list("prompt", prompt)
        if not tokens:
            raise ValueError("the prompt gives no tokens")
        if len(tokens) >= self._model.n_ctx:
            raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {self._model.n_ctx}")
        return tokens

    def _limit(self, tokens: List[int], max_tokens: Optional[int]) -> int:
        max_tokens = _args.integer("max_tokens", max_tokens, allow_none=True)
        room = self._model.n_ctx - len(tokens)
        # llama-cpp-python: None or <= 0 generates until the context is full;
        # more than fits ends at the context's end.
        return room if max_tokens is None or max_tokens <= 0 else min(max_tokens, room)

    def _start(
        self,
        tokens: List[int],
        max_tokens: Optional[int],
        temperature: float,
        top_p: float,
        min_p: float,
        top_k: int,
        repeat_penalty: float,
        presence_penalty: float,
        frequency_penalty: float,
        seed: Optional[int],
        stop: List[str],
        logprobs: Optional[int],
        response_format: Optional[str] = None,
        hooks: Optional[Dict[str, Any]] = None,
    ) -> Union[_Generation, LocalRun]:
        """The generation: on the engine, or on the token-level session
        when ``hooks`` (``logits_processor``, ``stopping_criteria``,
        ``grammar``, ``logit_bias``, ``tools``) or a cache ask for it."""
        hooks = dict(hooks or {})
        grammar, tools = hooks.get("grammar"), hooks.get("tools")
        if grammar is not None:
            if not isinstance(grammar, LlamaGrammar):
                raise TypeError(f"grammar must be a LlamaGrammar, not {type(grammar).__name__}")
            if response_format is not None or tools is not None:
                raise ValueError("grammar cannot be given with response_format or tools")
        limit = self._limit(tokens, max_tokens)
        local = any(hooks.get(k) is not None for k in ("logits_processor", "stopping_criteria", "logit_bias"))
        if local or self.cache is not None:
            if logprobs is not None:
                raise ValueError(
                    "logprobs are not served with logits_processor, stopping_criteria, logit_bias or a cache "
                    "(those completions run on the token-level session)"
                )
            if response_format is not None or tools is not None:
                raise ValueError(
                    "response_format and tools are not served with logits_processor, stopping_criteria, logit_bias "
                    "or a cache: use grammar=LlamaGrammar.from_json_schema(...)"
                )
            if _args.number("temperature", temperature) < 0:
                raise ValueError(f"temperature must be >= 0, not {temperature}")
            sampler = self._sampler(
                top_k, top_p, min_p, temperature, repeat_penalty, frequency_penalty, presence_penalty,
                grammar, hooks.get("logit_bias"), seed,
            )
            return LocalRun(self, tokens, limit, stop, sampler, hooks.get("logits_processor"), hooks.get("stopping_criteria"))
        if grammar is not None:
            response_format = grammar._response_format()
        sampling = self._sampling(
            temperature, top_k, top_p, min_p, repeat_penalty, frequency_penalty, presence_penalty, None, seed
        )
        return self._model.generate(tokens, limit, sampling, stop, logprobs, True, response_format, tools, self._draft)

    def create_completion(
        self,
        prompt: Union[str, bytes, Sequence[int]],
        suffix: Optional[str] = None,
        max_tokens: Optional[int] = 16,
        temperature: float = 0.8,
        top_p: float = 0.95,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        logprobs: Optional[int] = None,
        echo: bool = False,
        stop: Union[None, str, List[str]] = None,
        frequency_penalty: float = 0.0,
        presence_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        top_k: int = 40,
        stream: bool = False,
        seed: Optional[int] = None,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        model: Optional[str] = None,
        stopping_criteria: Any = None,
        logits_processor: Any = None,
        grammar: Optional[LlamaGrammar] = None,
        logit_bias: Optional[Dict[int, float]] = None,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """Continues ``prompt``: a completion dict, or with ``stream=True``
        an iterator of chunks (llama-cpp-python's shapes). ``tfs_z`` is
        taken and not applied, as in llama-cpp-python 0.3."""
        if suffix is not None:
            raise ValueError("suffix (fill-in-the-middle) is not served by Baton")
        if _args.number("typical_p", typical_p) != 1.0:
            raise ValueError("typical_p is not served by Baton: only 1.0 (off)")
        if _args.integer("mirostat_mode", mirostat_mode) != 0:
            raise ValueError("mirostat sampling is not served by Baton: only mirostat_mode=0")
        logprobs = _args.integer("logprobs", logprobs, minimum=0, allow_none=True)
        tokens = self._prompt_tokens(prompt)
        stops = _args.stops(stop)
        hooks = dict(stopping_criteria=stopping_criteria, logits_processor=logits_processor, grammar=grammar, logit_bias=logit_bias)
        # echo with logprobs: the prompt's tokens scored in one pass first.
        scored = self._model.score(tokens, logprobs) if echo and logprobs is not None else None
        generation = self._start(
            tokens, max_tokens, temperature, top_p, min_p, top_k, repeat_penalty,
            presence_penalty, frequency_penalty, seed, stops, logprobs, hooks=hooks,
        )
        answers = _shapes.answers(self._model, False, model or self.model_path)
        head = ""
        if echo:
            head = prompt if isinstance(prompt, str) else self.detokenize(tokens).decode("utf-8", errors="replace")
        echoed = (tokens[0], scored) if scored is not None else None
        if stream:
            return self._stream_completion(generation, answers, head, logprobs is not None, echoed)
        return self._whole_completion(generation, answers, head, logprobs is not None, echoed)

    def __call__(self, prompt: Union[str, bytes, Sequence[int]], *args: Any, **kwargs: Any) -> Any:
        """``create_completion``."""
        return self.create_completion(prompt, *args, **kwargs)

    def _whole_completion(
        self, generation: _Generation, answers: _Answers, head: str, want_logprobs: bool, echoed: Optional[tuple]
    ) -> Dict[str, Any]:
        text, entries = _drain(generation)
        if echoed is not None:
            first, scored = echoed
            answers.unscored(first)
            entries = scored + entries
        return answers.whole(
            head + text,
            entries if want_logprobs else None,
            generation.finish_reason,
            generation.prompt_tokens,
            generation.completion_tokens,
            generation.cached_tokens,
        )

    def _stream_completion(
        self, generation: _Generation, answers: _Answers, head: str, want_logprobs: bool, echoed: Optional[tuple]
    ) -> Iterator[Dict[str, Any]]:
        try:
            if head:
                head_entries = None
                if echoed is not None:
                    first, head_entries = echoed
                    answers.unscored(first)
                yield answers.chunk(head, head_entries, None)
            for text, entries in generation:
                yield answers.chunk(text, entries if want_logprobs else None, None)
            trailing = generation.trailing_logprobs()
            yield answers.chunk("", trailing if want_logprobs and trailing else None, generation.finish_reason)
        finally:
            generation.cancel()

    def create_chat_completion(
        self,
        messages: List[Dict[str, Any]],
        functions: Optional[List[Dict[str, Any]]] = None,
        function_call: Any = None,
        tools: Optional[List[Dict[str, Any]]] = None,
        tool_choice: Any = None,
        temperature: float = 0.2,
        top_p: float = 0.95,
        top_k: int = 40,
        min_p: float = 0.05,
        typical_p: float = 1.0,
        stream: bool = False,
        stop: Union[None, str, List[str]] = None,
        seed: Optional[int] = None,
        response_format: Optional[Dict[str, Any]] = None,
        max_tokens: Optional[int] = None,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        repeat_penalty: float = 1.0,
        tfs_z: float = 1.0,
        mirostat_mode: int = 0,
        mirostat_tau: float = 5.0,
        mirostat_eta: float = 0.1,
        model: Optional[str] = None,
        logits_processor: Any = None,
        grammar: Optional[LlamaGrammar] = None,
        logit_bias: Optional[Dict[int, float]] = None,
        logprobs: Optional[bool] = None,
        top_logprobs: Optional[int] = None,
        stopping_criteria: Any = None,
    ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """Answers ``messages`` through the model's chat template: a chat
        completion dict, or with ``stream=True`` an iterator of chunks.
        ``tools`` and ``tool_choice`` as ``baton serve`` takes them (the
        legacy ``functions``/``function_call`` too): an answer that calls
        one has ``tool_calls`` and ``finish_reason: "tool_calls"``."""
        if functions is not None or function_call is not None:
            if tools is not None or tool_choice is not None:
                raise ValueError("give tools and tool_choice, or the legacy functions and function_call, not both")
            tools, tool_choice = _chat.legacy_functions(functions, function_call)
        form = _response_format(response_format)
        if _args.number("typical_p", typical_p) != 1.0:
            raise ValueError("typical_p is not served by Baton: only 1.0 (off)")
        if _args.integer("mirostat_mode", mirostat_mode) != 0:
            raise ValueError("mirostat sampling is not served by Baton: only mirostat_mode=0")
        top = _args.integer("top_logprobs", top_logprobs, minimum=0, allow_none=True)
        want_logprobs = bool(logprobs)
        if top is not None and not want_logprobs:
            raise ValueError("top_logprobs needs logprobs=True")
        # Rendered as the server renders it: a required call's opening
        # already after the generation prompt; a response_format besides
        # text beside tools that may be called is refused there.
        tokens, plan = self._model.chat(_chat.request(messages, tools, tool_choice, form))
        if len(tokens) >= self._model.n_ctx:
            raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {self._model.n_ctx}")
        hooks = dict(
            stopping_criteria=stopping_criteria, logits_processor=logits_processor, grammar=grammar,
            logit_bias=logit_bias, tools=plan,
        )
        generation = self._start(
            tokens, max_tokens, temperature, top_p, min_p, top_k, repeat_penalty,
            presence_penalty, frequency_penalty, seed, _args.stops(stop),
            (top or 0) if want_logprobs else None,
            form,
            hooks,
        )
        answers = _shapes.answers(self._model, True, model or self.model_path)
        if stream and plan is None:
            return self._stream_chat(generation, answers, want_logprobs)
        text, entries = _drain(generation)
        calls = _chat.tool_calls(plan, text) if plan is not None else None
        if stream:
            # A call is sent whole once read: the text is a call only if it
            # closes as one.
            if calls:
                return _chat.call_chunks(answers.opening(), answers.chunk(None, None, "stop"), calls)
            return iter([answers.opening(), answers.chunk(text, None, None), answers.chunk(None, None, generation.finish_reason)])
        whole = answers.whole(
            text,
            entries if want_logprobs else None,
            generation.finish_reason,
            generation.prompt_tokens,
            generation.completion_tokens,
            generation.cached_tokens,
        )
        return _chat.as_calls(whole, calls) if calls else whole

    def _stream_chat(self, generation: _Generation, answers: _Answers, want_logprobs: bool) -> Iterator[Dict[str, Any]]:
        try:
            yield answers.opening()
            for text, entries in generation:
                yield answers.chunk(text, entries if want_logprobs else None, None)
            trailing = generation.trailing_logprobs()
            yield answers.chunk(None, trailing if want_logprobs and trailing else None, generation.finish_reason)
        finally:
            generation.cancel()

    # Embeddings.

    def embed(
        self,
        input: Union[str, List[str]],
        normalize: bool = False,
        truncate: bool = True,
        return_count: bool = False,
    ) -> Any:
        """The embedding of a text (a list of floats), or of each text of a
        list: the final hidden states pooled (``pooling``), scaled to unit
        length when ``normalize``. ``truncate`` cuts a text longer than the
        context (else it is a ValueError). With ``return_count``, also the
        number of tokens embedded."""
        texts = [input] if isinstance(input, str) else input
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
            raise TypeError("input must be a string or a list of strings")
        if not texts:
            raise ValueError("input is empty")
        token_lists = []
        for text in texts:
            tokens = self.tokenize(text.encode("utf-8"), add_bos=True, special=False)
            if len(tokens) > self._model.n_ctx:
                if not truncate:
                    raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {self._model.n_ctx}")
                tokens = tokens[: self._model.n_ctx]
            token_lists.append(tokens)
        vectors = self._model.embed(token_lists, self.pooling, bool(normalize))
        out = vectors[0] if isinstance(input, str) else vectors
        if return_count:
            return out, sum(len(t) for t in token_lists)
        return out

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None) -> Dict[str, Any]:
        """OpenAI's embeddings response (unit vectors, as `/v1/embeddings`
        gives them)."""
        vectors, count = self.embed(input, normalize=True, return_count=True)
        if isinstance(input, str):
            vectors = [vectors]
        return {
            "object": "list",
            "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
            "model": model or self.model_path,
            "usage": {"prompt_tokens": count, "total_tokens": count},
        }

    # Life cycle.

    def close(self) -> None:
        """Stops the engine (running generations end with an error) and
        frees the token-level session."""
        self._model.close()
        self._session_handle = None

    def __enter__(self) -> "Llama":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LlamaTokenizer:
    """llama-cpp-python's tokenizer object over a ``Llama``."""

    def __init__(self, llama: Llama):
        self.llama = llama

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = True) -> List[int]:
        return self.llama.tokenize(text, add_bos=add_bos, special=special)

    def detokenize(self, tokens: Sequence[int], prev_tokens: Optional[Sequence[int]] = None, special: bool = False) -> bytes:
        return self.llama.detokenize(tokens, special=special)

    def encode(self, text: str, add_bos: bool = True, special: bool = True) -> List[int]:
        return self.tokenize(text.encode("utf-8", errors="ignore"), add_bos=add_bos, special=special)

    def decode(self, tokens: Sequence[int]) -> str:
        return self.detokenize(tokens).decode("utf-8", errors="ignore")


# llama-cpp-python's chat formats, each with a mark of its template: a
# format maps where the GGUF file's own template (which Baton always uses)
# is that format.
_CHAT_FORMAT_MARKS = {
    "chatml": "<|im_start|>",
    "llama-3": "<|start_header_id|>",
    "llama-2": "[INST]",
    "mistral-instruct": "[INST]",
    "gemma": "<start_of_turn>",
    "phi3": "<|assistant|>",
    "zephyr": "<|assistant|>",
}


def _chat_format_maps(chat_format: Any, template: str) -> bool:
    """Whether ``chat_format`` is what the GGUF file's chat template gives."""
    if chat_format in ("chat_template.default", "jinja"):
        return True
    mark = _CHAT_FORMAT_MARKS.get(chat_format)
    return mark is not None and mark in (template or "")


def _drain(generation: _Generation):
    """Runs a generation to its end: its text and logprob entries. An
    interruption (Ctrl-C) cancels it, which frees its sequence."""
    pieces: List[str] = []
    entries: List[Any] = []
    try:
        for text, logprobs in generation:
            pieces.append(text)
            entries.extend(logprobs)
        entries.extend(generation.trailing_logprobs())
    finally:
        generation.cancel()
    return "".join(pieces), entries


def _response_format(response_format: Optional[Dict[str, Any]]) -> Optional[str]:
    """The format as the engine takes it (an OpenAI ``response_format`` as
    JSON text), or None for free text. llama-cpp-python's form of a schema,
    ``{"type": "json_object", "schema": {...}}``, is taken too."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise TypeError("response_format must be a dict such as {'type': 'json_object'}")
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object" and response_format.get("schema") is not None:
        response_format = {"type": "json_schema", "json_schema": {"schema": response_format["schema"]}}
    try:
        return json.dumps(response_format)
    except (TypeError, ValueError) as e:
        raise TypeError(f"response_format must be JSON: {e}") from None
