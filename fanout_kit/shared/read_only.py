"""Read-only attributes for the public constructs: once built, their resources cannot be replaced
by assignment (``fanout.state_machine = other`` raises), as the props pattern promises."""

from __future__ import annotations

from typing import Any


class ReadOnlyAttributes:
    """Mix in before Construct; call ``_seal()`` at the end of ``__init__``."""

    def _seal(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_sealed", False) and not name.startswith("_"):
            raise AttributeError(f"{type(self).__name__}.{name} is read-only: pass a prop instead")
        super().__setattr__(name, value)
