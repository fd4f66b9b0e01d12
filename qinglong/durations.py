"""Retention durations `N[smhd]` (SPEC §9.6): `0s`, `90m`, `14d`.

Pure and dependency-free: the argparse-only command modules (admin_cli,
runtime_cli) import it at parser-build time.
"""

from __future__ import annotations

import re

_DURATION = re.compile(r"^([0-9]{1,9})([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION_S = 36500 * 86400  # a century: far past any retention, far from overflow


def parse_duration_s(text: str) -> int:
    """Whole seconds of `N[smhd]`; ValueError (with a message) otherwise."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r} (N followed by s, m, h or d, e.g. 14d)")
    seconds = int(match.group(1)) * _UNIT_S[match.group(2)]
    if seconds > MAX_DURATION_S:
        raise ValueError(f"duration {text!r} is longer than 36500d")
    return seconds
