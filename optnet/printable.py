"""Text that cannot forge lines or reach a terminal as a control sequence.

Names in results files and instances, and file names, are untrusted: a newline could forge a
line of a report or a message, an ESC sequence could rewrite the user's terminal, a bidi override
could reorder what they read. :func:`text_safe` shows every such character as a visible escape;
every report format builds on it (``optnet.report``), and every message optnet prints passes
through it (``optnet.streams.say``).
"""

from __future__ import annotations

import unicodedata
from typing import Any

_INVISIBLE = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))
"""Unicode categories shown as escapes: controls (newline, ESC), format characters (bidi
overrides, zero-width), lone surrogates (not encodable) and line/paragraph separators."""
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible_char(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def text_safe(x: Any) -> str:
    """``x`` as one line of printable text: every control or format character, line break and
    lone surrogate as a visible escape (``\\n``, ``\\x1b``, ``\\u202e``). The base of
    every format's escaping."""
    s = str(x)
    if s.isprintable():
        return s
    return "".join(_visible_char(ch) if unicodedata.category(ch) in _INVISIBLE else ch for ch in s)
