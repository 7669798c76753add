"""A string wrapper for credentials that never shows its value by accident."""

from __future__ import annotations

import hmac
from typing import Any, NoReturn, final

_REDACTED = "Secret('***')"


@final
class Secret:
    """Hold a credential: repr/str are redacted, equality is by value, serialisers refuse it."""

    __slots__ = ("_value",)

    _value: str

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("Secret wraps a str")
        object.__setattr__(self, "_value", value)

    def reveal(self) -> str:
        """Return the wrapped value; call this only where the credential is really used."""
        return self._value

    def __repr__(self) -> str:
        return _REDACTED

    __str__ = __repr__

    def __format__(self, format_spec: str) -> str:
        return _REDACTED

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        # Constant-time comparison: a Secret is compared against attacker-influenced values.
        return hmac.compare_digest(_as_bytes(self._value), _as_bytes(other._value))

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("Secret is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError("Secret is immutable")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self

    def __reduce__(self) -> NoReturn:
        # Pickling would write the credential into bytes that outlive the process.
        raise TypeError("Secret values cannot be pickled")

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError("Secret values cannot be pickled")


def _as_bytes(value: str) -> bytes:
    # Environment strings may carry lone surrogates (surrogateescape); keep them comparable.
    return value.encode("utf-8", "surrogatepass")
