"""llama-cpp-python's hooks into decoding: ``LogitsProcessorList``
(callables ``(input_ids, scores) -> scores`` applied in turn to each row of
logits before the draw) and ``StoppingCriteriaList`` (callables
``(input_ids, logits) -> bool``: any true ends the generation)."""

from typing import Any, Callable, List

LogitsProcessor = Callable[[Any, Any], Any]
StoppingCriteria = Callable[[Any, Any], bool]


class LogitsProcessorList(List[LogitsProcessor]):
    def __call__(self, input_ids: Any, scores: Any) -> Any:
        for processor in self:
            scores = processor(input_ids, scores)
        return scores


class StoppingCriteriaList(List[StoppingCriteria]):
    def __call__(self, input_ids: Any, logits: Any) -> bool:
        return any([bool(criterion(input_ids, logits)) for criterion in self])
