"""The one check of whole-number settings, and the one error a wrong setting raises.

Used by the retry policies here, by the constructs' props (fanout_kit) and by the app's cdk.json
settings (fanout_kit.shared.app_config): every message names the setting, the allowed range and the value found.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A setting or construct prop is wrong; the message names it and the fix."""


def whole_number(value: Any, where: str, low: int, high: int | None = None, meaning: str = "") -> int:
    """``value`` if it is an int (not a bool) from ``low`` to ``high`` (no upper bound if None)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        allowed = f"a whole number from {low} to {high}" if high is not None else f"a whole number >= {low}"
        about = f" ({meaning})" if meaning else ""
        raise ConfigError(f"{where}: must be {allowed}{about}, got {value!r}")
    return value


def one_of(existing: object, props: object, existing_name: str, props_name: str) -> None:
    """An existing resource and the props to create one exclude each other."""
    if existing is not None and props is not None:
        raise ConfigError(f"{existing_name} and {props_name}: pass one of them, not both")
