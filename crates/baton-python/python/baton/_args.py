"""Checks of the arguments callers pass, with llama-cpp-python's names: a
wrong type is a TypeError and a wrong value a ValueError, each naming the
argument, before anything reaches the engine."""

import numbers
from typing import Any, List, Optional, Sequence, Union


def integer(
    name: str, value: Any, *, minimum: Optional[int] = None, maximum: int = 2**63 - 1, allow_none: bool = False
) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int{' or None' if allow_none else ''}, not {type(value).__name__}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    if value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, not {value}")
    return value


def number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


def stops(value: Union[None, str, Sequence[str]]) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise TypeError("stop must be a string or a list of strings")
    if any(s == "" for s in value):
        raise ValueError("stop strings must not be empty")
    return list(value)


def devices(value: Union[None, str, Sequence[str]]) -> str:
    if value is None:
        return "cpu"
    if isinstance(value, str):
        return value
    if not isinstance(value, (list, tuple)) or not all(isinstance(d, str) for d in value):
        raise TypeError('devices must be a list of device names such as ["cpu:0", "cpu:1"]')
    if not value:
        raise ValueError("devices is empty")
    return ",".join(value)


def token_list(name: str, value: Any) -> List[int]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list of token ids, not {type(value).__name__}")
    out = []
    for t in value:
        if isinstance(t, bool) or not isinstance(t, numbers.Integral):
            raise TypeError(f"{name} must hold ints (token ids), not {type(t).__name__}")
        if t < 0 or t >= 2**32:
            raise ValueError(f"token id {t} in {name} is not a token id (0 to 2**32 - 1)")
        out.append(int(t))
    return out
