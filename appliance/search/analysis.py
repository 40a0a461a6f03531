"""How text becomes search terms, for the index and the query alike: lower-cased Unicode words (``\\w+``),
folded to ASCII where that only drops accents, English stop words removed, Snowball English stems.

The same chain as LanceDB's default full-text tokenizer (which the index used before, see resident.py), so
BM25 scores keep their scale and the D1 calibration of docs/search.md stays valid. Stems are computed once
per distinct word and cached (the vocabulary of a memory store is small next to its word count).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from functools import lru_cache

import Stemmer

WORD = re.compile(r"\w+")
MAX_WORD = 40  # longer "words" (hashes, base64) are dropped, as LanceDB's tokenizer does

# NLTK's English list, which LanceDB's tokenizer removes too ("won"/"don" are contraction remnants there)
_NLTK_ENGLISH = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself
it its itself they them their theirs themselves what which who whom this that these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until while of at by for
with about against between into through during before after above below to from up down in out on off over
under again further then once here there when where why how all any both each few more most other some such no
nor not only own same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn
doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
"""
STOP_WORDS = frozenset(_NLTK_ENGLISH.split())

_stemmer = Stemmer.Stemmer("english", 0)  # PyStemmer objects are not thread-safe: used under _stem_lock
_stem_lock = threading.Lock()


def fold(word: str) -> str:
    """``café`` → ``cafe``: accents dropped (NFKD without combining marks); other scripts unchanged."""
    if word.isascii():
        return word
    folded = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
    return folded or word


@lru_cache(maxsize=1 << 16)
def term(word: str) -> str | None:
    """The index term of one lower-cased word, or None for a stop word or an overlong token."""
    if len(word) > MAX_WORD:
        return None
    folded = fold(word)
    if folded in STOP_WORDS:
        return None
    with _stem_lock:
        return str(_stemmer.stemWord(folded))


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def terms(text: str) -> list[str]:
    """Every term of a text, in order, repeats kept (term frequencies count them)."""
    return [t for t in map(term, words(text)) if t is not None]


def fuzziness(word: str) -> int:
    """Edits allowed when matching a query word (as Elasticsearch's AUTO): none for short words, so that
    "cat" does not match "car", one for 4–6 letters, two from 7 ("transprot" → "transport")."""
    return 0 if len(word) <= 3 else 1 if len(word) <= 6 else 2
