"""People's names that NER misses: written in lower case, or from outside its training data, found by context.

``en_core_web_sm`` knows a name by its capital letters and by the names it saw in training (mostly English
news): "talked to ngozi adeyemi yesterday", "ask priya about the rota" or "Lakshmi asked…" go unseen. Here a
name is a run of 1–4 words that are no English words (the WordNet index of the model's lemmatizer; inflected
forms too), or given names and surnames of the bundled list (US census: "li", "grace", "nguyen"), with name
particles inside ("van der", "de la", "al", "bin"), hyphenated or with an apostrophe ("jin-woo", "o'brien"),
and that is introduced the way people are:

* after a word that only people follow: "ask", "tell", "ping", "cc", "dm", "thanks", "hey", "met", "remind",
  "talked/spoke to", "loop in", "@" — one word is enough when what follows cannot continue a noun phrase
  ("ask priya about…", "dm kenji the link", "thanks to oluwaseun,"), which keeps "talked to kubernetes support"
  out;
* after "to", "with", "from", "by", "and", which also come before places and things: two words or more, and not
  a place that NER found ("flew to São Paulo");
* at the start of a sentence before a verb of saying ("lakshmi asked…", "mateus oliveira mentioned…"), or for
  two words or more before an auxiliary ("aroha ngata is taking…").

A word of any case counts; capitalised names that NER found already come out twice and merge. Pure: the
vocabulary is given (``NameVocabulary``), no spaCy here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

# Lower-case words inside names that join the words around them: "van der", "de la", "dos", "al", "bin".
_PARTICLES = "van der den de la le del della di da das dos do du von zu ter ten bin binti ibn bint al el abu"
NAME_PARTICLES = frozenset(_PARTICLES.split())
# Words of organisation and place names; a person's name has none of them ("Microsoft Teams", "San Francisco").
_ORG_AND_PLACE_WORDS = (
    "inc corp corporation co ltd llc gmbh ag plc sa team teams group labs lab systems technologies tech software "
    "services service cloud bank university college institute foundation airlines airways hospital school "
    "department ministry agency council committee association club hotel airport station street st avenue ave "
    "road rd bridge park lake river mount mt fort port san santa los las new north south east west city county "
    "state states kingdom republic united"
)
NOT_IN_NAMES = frozenset(_ORG_AND_PLACE_WORDS.split())
_CALENDAR_WORDS = (
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday today tomorrow tonight yesterday"
)
_CALENDAR = frozenset(_CALENDAR_WORDS.split())

# Words that only people follow ("ask priya"), and pairs that end in a preposition ("talked to", "loop in").
_PERSON_CUE_WORDS = (
    "ask asked asking tell told telling ping pinged dm dmed cc bcc cc'd thanks thank hey hi hello dear "
    "met meet meeting remind reminded call called email emailed message messaged text texted"
)
_PERSON_CUES = frozenset(_PERSON_CUE_WORDS.split())
_PAIR_VERBS = (
    "talk talked talking spoke speak speaking chat chatted chatting reach reached out reply replied write wrote "
    "loop looped looping"
)
_PERSON_CUE_PAIRS = frozenset(
    (verb, preposition) for verb in _PAIR_VERBS.split() for preposition in ("to", "with", "in")
)
# Words that also come before places and things: a run of two name words or more.
_WEAK_CUE_WORDS = "to with from by and for via saw see"
_WEAK_CUES = frozenset(_WEAK_CUE_WORDS.split())
# Verbs of saying after a name at a sentence's start; auxiliaries count after two words or more.
_SAYING_WORDS = (
    "said says asked asks mentioned mentions wants wanted thinks thought told tells replied replies wrote writes "
    "agreed agrees confirmed confirms suggested suggests noted notes reported reports promised explained approved "
    "sent shared called emailed pinged messaged texted needs needed"
)
_SAYING = frozenset(_SAYING_WORDS.split())
_AUXILIARY_WORDS = "is was will would can could should has had may might must does did"
_AUXILIARIES = frozenset(_AUXILIARY_WORDS.split())
_SENTENCE_END = frozenset(".!?;:")

# A word: letters, hyphenated or with an apostrophe inside ("jin-woo", "o'brien"), not a possessive "'s".
_TOKEN = re.compile(r"@|[^\W\d_]+(?:['’-](?![sS]\b)[^\W\d_]+)*|\S")


@dataclass(frozen=True, slots=True)
class NameVocabulary:
    """What the finder knows: English words (with inflections), function words, and given names and surnames."""

    english: frozenset[str]
    stop_words: frozenset[str]
    known_names: frozenset[str]
    inflections: dict[str, str]  # irregular forms → lemma ("went" → "go")

    def is_english(self, word: str) -> bool:
        if word in self.english or word in self.stop_words or word in self.inflections:
            return True
        return any(stem in self.english for stem in _stems(word))


def _stems(word: str) -> Iterable[str]:
    """Candidate lemmas of a regularly inflected English word ("talked" → "talk", "copies" → "copy")."""
    for suffix, replacement in (("ies", "y"), ("es", ""), ("s", ""), ("ied", "y"), ("ed", ""), ("ed", "e"),
                                ("ing", ""), ("ing", "e"), ("er", ""), ("est", ""), ("ly", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: len(word) - len(suffix)] + replacement
            yield stem
            if len(stem) >= 4 and stem[-1] == stem[-2]:
                yield stem[:-1]  # "chatted" → "chat"


def load_known_names() -> frozenset[str]:
    """Given names and surnames, lower case, from the ``names`` package (US Census 1990 lists, MIT licence); empty
    when it is not installed (names are then found by the English-word test alone)."""
    known: set[str] = set()
    try:
        files = resources.files("names")
    except ModuleNotFoundError:
        return frozenset()
    for name in ("dist.male.first", "dist.female.first", "dist.all.last"):
        try:
            text = files.joinpath(name).read_text(encoding="ascii")
        except (FileNotFoundError, UnicodeDecodeError):
            continue
        known.update(line.split(None, 1)[0].lower() for line in text.splitlines() if line.strip())
    return frozenset(known)


@dataclass(frozen=True, slots=True)
class _Word:
    start: int
    end: int
    lower: str
    after_break: bool  # a line break or the text's start comes right before it

    @property
    def alphabetic(self) -> bool:
        return self.lower[0].isalpha()


def _words(text: str) -> list[_Word]:
    words = []
    done = 0
    for match in _TOKEN.finditer(text):
        gap = text[done:match.start()]
        words.append(_Word(match.start(), match.end(), match.group().lower(), "\n" in gap or done == 0))
        done = match.end()
    return words


def cued_names(
    text: str,
    vocabulary: NameVocabulary,
    places: Iterable[tuple[int, int]] = (),
    people: Iterable[tuple[int, int]] = (),
) -> list[tuple[int, int]]:
    """Character spans of the names in ``text`` that context introduces (see the module docstring). ``places``:
    spans that NER calls a place, which a name after a weak cue must not lie inside;
    ``people``: spans that NER calls a person, which vouch for a run of words that are also English ("li wei")."""
    places, people = list(places), list(people)
    words = _words(text)
    spans = []
    i = 0
    while i < len(words):
        cue = _cue(words, i)
        start_of_sentence = i == 0 or words[i].after_break or words[i - 1].lower in _SENTENCE_END
        if cue is None and not start_of_sentence:
            i += 1
            continue
        end = _run(words, i, vocabulary, cue == "person")
        run = [word for word in words[i:end] if word.lower not in NAME_PARTICLES]
        after = words[end].lower if end < len(words) and not words[end].after_break else ""
        start, stop = words[i].start, words[end - 1].end if end > i else words[i].end
        person = any(p_start <= start and stop <= p_end for p_start, p_end in people)
        in_place = cue != "person" and any(p_start <= start and stop <= p_end for p_start, p_end in places)
        if run and not in_place and _accepted(run, cue, start_of_sentence, after, vocabulary, person):
            spans.append((start, stop))
            i = end
            continue
        i += 1
    return spans


def _cue(words: list[_Word], i: int) -> str | None:
    """"person" after a word that only people follow, "weak" after one that places and things follow too."""
    if i == 0 or words[i].after_break:
        return None
    before = words[i - 1].lower
    if before == "@" and words[i - 1].end == words[i].start:
        return "person"
    if before in _PERSON_CUES or (i >= 2 and (words[i - 2].lower, before) in _PERSON_CUE_PAIRS):
        return "person"
    return "weak" if before in _WEAK_CUES else None


def _run(words: list[_Word], i: int, vocabulary: NameVocabulary, person_cue: bool) -> int:
    """The end (exclusive) of the run of up to four name words from ``words[i]``, particles inside it. Surnames
    that are also words of places ("park", "west", "street") count where a place cannot stand: after a person cue,
    or before a verb of saying ("jin-woo park said")."""
    end = i
    count = 0
    while end < len(words) and count < 4:
        word = words[end]
        if end > i and (word.after_break or words[end - 1].end == word.start):
            break  # words of one name are split by spaces on one line
        following = words[end + 1].lower if end + 1 < len(words) else ""
        if word.alphabetic and _name_like(word.lower, vocabulary):
            end += 1
            count += 1
        elif end > i and word.lower in NOT_IN_NAMES and word.lower in vocabulary.known_names \
                and (person_cue or following in _SAYING):
            end += 1
            break
        elif end > i and word.lower in NAME_PARTICLES and following and words[end + 1].alphabetic \
                and _name_like(following, vocabulary):
            end += 1
        else:
            break
    return end


def _parts(word: str) -> list[str]:
    """The parts of a hyphenated or apostrophe name of two letters or more ("o'brien" → ["brien"])."""
    return [part for part in re.split(r"['’-]", word) if len(part) >= 2]


def _foreign(word: str, vocabulary: NameVocabulary) -> bool:
    """No English word: some part of it is none ("adeyemi", "el-masry", "o'brien"), or a hyphenated word that is
    no English compound and joins names ("min-ho", "lee-ann"; not "on-call", "hand-off", "follow-up")."""
    parts = _parts(word)
    if parts and any(not vocabulary.is_english(part) for part in parts):
        return True
    return (
        len(parts) >= 2
        and not vocabulary.is_english(word)
        and all(part in vocabulary.known_names and part not in vocabulary.stop_words for part in parts)
    )


def _name_like(word: str, vocabulary: NameVocabulary) -> bool:
    if word in vocabulary.stop_words or word in _CALENDAR or word in NAME_PARTICLES or word in NOT_IN_NAMES \
            or word in _PERSON_CUES or word in _WEAK_CUES or word in _SAYING or word in _AUXILIARIES:
        return False  # "ping", "call" and "said" are surnames too, but not in "ping haruto sato said"
    parts = _parts(word)
    return _foreign(word, vocabulary) or (bool(parts) and all(part in vocabulary.known_names for part in parts))


def _accepted(run: list[_Word], cue: str | None, start_of_sentence: bool, after: str,
              vocabulary: NameVocabulary, person: bool) -> bool:
    """Whether a run of name words is a name here; ``person``: NER calls it one, though its words are English."""
    if not person and not any(_foreign(word.lower, vocabulary) for word in run):
        return False  # "talked to sales", "ask will about it"
    if len(run) == 1:
        ends_phrase = not after or not after[0].isalnum() or after in vocabulary.stop_words
        return (cue == "person" and (ends_phrase or after in _SAYING)) or (start_of_sentence and after in _SAYING)
    return cue is not None or (start_of_sentence and (after in _SAYING or after in _AUXILIARIES))
