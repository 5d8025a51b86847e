"""When two bot names count as the same name: the key the ``bots`` table is indexed by.

The registry refuses a name whose key is taken, and a connecting bot's name is
looked up by its key; the store keeps each bot's key in ``bots.name_key``
(indexed, filled at registration, and by :meth:`Store.open` for rows that have
none), so neither reads the whole table. A change to these rules must clear
the column (``UPDATE bots SET name_key = NULL`` in a migration) so that every
row is keyed again when the database is next opened.
"""

from __future__ import annotations

import functools
import unicodedata

# Look-alikes folded onto the Latin letter they imitate, applied after NFKC and case folding: the
# Cyrillic and Greek letters that pass for Latin ones in upper or lower case (Cyrillic "а" for "a",
# Greek "Ο"/"ο" for "o", ...). A small skeleton in the spirit of Unicode TR 39, enough that
# "rаndom" (Cyrillic a) or "RΑNDOM" (Greek Alpha) collides with "random".
_CONFUSABLES = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "ё": "e", "һ": "h", "н": "h", "і": "i", "ї": "i",
        "ј": "j", "к": "k", "ӏ": "l", "м": "m", "о": "o", "р": "p", "ԛ": "q", "с": "c", "ѕ": "s",
        "т": "t", "у": "y", "ԝ": "w", "х": "x", "ԁ": "d", "ь": "b", "п": "n", "з": "3",
        # Greek (after case folding)
        "α": "a", "β": "b", "ε": "e", "η": "h", "ι": "i", "κ": "k", "μ": "m", "ν": "v", "ο": "o",
        "ρ": "p", "τ": "t", "υ": "y", "χ": "x", "ζ": "z", "ϲ": "c", "ϳ": "j",
        # Latin look-alikes that NFKC keeps apart
        "ı": "i", "ȷ": "j", "ɡ": "g", "ɑ": "a", "ℓ": "l",
    }
)  # fmt: skip


@functools.lru_cache(maxsize=8192)
def name_key(name: str) -> str:
    """The form under which two bot names count as the same name.

    NFKC (fullwidth and other compatibility forms become plain letters), then
    case folding, then Cyrillic/Greek look-alikes mapped to the Latin letters
    they imitate. ``name_key("Rаndom")`` (Cyrillic a) equals ``name_key("random")``.
    Memoised: every Hello compares its name with every connected bot's.
    """
    folded = unicodedata.normalize("NFKC", name).casefold()
    return unicodedata.normalize("NFKC", folded.translate(_CONFUSABLES))
