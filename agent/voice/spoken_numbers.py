"""Spoken Spanish as the citation check reads it: numbers in words as digits, letters by name, and a map back.

The agent's words arrive as a transcript of speech: "el artículo setenta y cuatro", "el artículo doce be",
"el artículo décimo tercero". `prepare` turns a text into one the citation patterns can read (accents off,
whitespace collapsed, numbers in words as digits through text2num's `find_numbers`, threshold 0 so "artículo uno"
and "artículo primero" are read too) while remembering, for every character, the span of the given text it came
from, so that a citation can be quoted in the agent's own words. `article_number` reads one article label at a
position of that text: digits or the ordinals text2num leaves in words ("segundo", "sétimo"), with a suffix
letter ("12-A", "12 a", "doce be") or a Latin one ("12 bis").

Parsing spoken numbers is text2num's job; what is kept here is only what it does not do: the offsets, the two
ordinals it leaves alone, and letters said by their names.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from text_to_num import find_numbers


def fold(text: str) -> str:
    """Lowercase, accents off, spaces collapsed: spoken transcripts and source citations meet here."""
    return " ".join(strip_accents(text).lower().split())


def strip_accents(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@dataclass(frozen=True, slots=True)
class Prepared:
    """A text as the reading sees it, and where each of its characters came from in the text as given.

    `original` keeps case (accents off, whitespace collapsed, numbers in words as digits, ordinal marks as "°");
    `low` is the same lowercased, character for character. `starts[i]`/`ends[i]` are the span of the given text
    that character i was made from: the character itself, or the whole word or run of number words it replaced.
    """

    text: str
    original: str
    low: str
    starts: list[int]
    ends: list[int]

    def given(self, start: int, end: int) -> str:
        """The words as given that low[start:end] was made from."""
        return self.text[self.starts[start] : self.ends[end - 1]] if end > start else ""


class _Word:
    """A word for text2num's `find_numbers`, which reads a stream of tokens and says which of them are numbers."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def text(self) -> str:
        return self._text

    def nt_separated(self, previous: _Word) -> bool:
        return False

    def not_a_number_part(self) -> bool:
        return False


# Words (combining accents included, for text typed decomposed) and single marks; whitespace is what lies between.
_TOKEN = re.compile(r"[\w\u0300-\u036f]+|\S")
_ORDINAL_MARKS = str.maketrans({"º": "°", "ª": "°"})


def prepare(text: str) -> Prepared:
    """The text with spelled-out numbers as digits (text2num, threshold 0 so "artículo uno" is read too), accents
    off, whitespace collapsed, and a map back to the given text, so a citation can be quoted in the words said."""
    spans = [m.span() for m in _TOKEN.finditer(text)]
    words = [text[a:b] for a, b in spans]
    numbers = {
        o.start: o
        for o in find_numbers(
            [_Word(w if w.isascii() else unicodedata.normalize("NFC", w)) for w in words], "es", threshold=0
        )
    }
    kept: list[str] = []
    lowered: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, previous_end = 0, None
    while i < len(spans):
        a, b = spans[i]
        number = numbers.get(i)
        if number is not None:
            b = spans[number.end - 1][1]
            piece, whole, i = number.text.translate(_ORDINAL_MARKS), True, number.end
        else:
            word = words[i]
            piece = word if word.isascii() else strip_accents(word.translate(_ORDINAL_MARKS))
            whole, i = len(piece) != len(word), i + 1
        low = piece.lower()
        if len(low) != len(piece):  # a character whose lowercase is longer: the case check is lost, not the text
            piece, whole = low, True
        if not piece:
            continue
        if previous_end is not None and previous_end < a:
            kept.append(" ")
            lowered.append(" ")
            starts.append(previous_end)
            ends.append(a)
        kept.append(piece)
        lowered.append(low)
        if whole:
            starts.extend([a] * len(piece))
            ends.extend([b] * len(piece))
        else:
            starts.extend(range(a, b))
            ends.extend(range(a + 1, b + 1))
        previous_end = b
    return Prepared(text, "".join(kept), "".join(lowered), starts, ends)


# One article number as said, after text2num: digits, or the ordinals text2num leaves in words.
_ORDINAL_WORDS = {"segundo": 2, "segunda": 2, "setimo": 7, "setima": 7}
_ARTICLE_NUMBER = re.compile(r"(?P<n>\d{1,4}|segund[oa]|setim[oa])(?!\d|[.,]\d)(?:\.?\s?°)?")
NUMBER_AHEAD = r"(?=\d|segund|setim)"
"""A lookahead for where an article number may start in a prepared text."""
_LATIN = re.compile(r"(?:\s*(?:-|guion)\s*|\s+)?(bis|ter|quater|quinquies)\b")
# A suffix letter said by its name ("el artículo doce be"). Names that are also words said after a number are left
# out: "de" (the preposition), "e", "o", "u", "ye" (conjunctions), "te" and "ese" (pronouns), and "i".
_LETTER_NAMES = {
    "be": "B", "ce": "C", "efe": "F", "ge": "G", "hache": "H", "jota": "J", "ka": "K", "ele": "L", "eme": "M",
    "ene": "N", "pe": "P", "cu": "Q", "erre": "R", "uve": "V", "equis": "X", "zeta": "Z",
}  # fmt: skip
_LETTER_NAME = re.compile(rf"(?:\s*(?:-|guion)\s*|\s+)({'|'.join(_LETTER_NAMES)})\b")
_LETTER_JOINED = re.compile(r"\s*(?:-|guion)\s*([a-z])\b|([a-z])\b")
_LETTER_SPACED = re.compile(r"\s+([a-z])\b")
# After a lowercase "a" that is an article's letter ("el artículo 12 a, de la ley…"), not the preposition.
_AFTER_LETTER_A = re.compile(r"\s*(?:$|[,.;:)!?]|\s(?:de|del|y|e|o|u)\b)")


def article_number(original: str, low: str, pos: int) -> tuple[str, int] | None:
    """The article label said at `pos` of a prepared text ("74", "12-A", "12 bis") and where it ends."""
    m = _ARTICLE_NUMBER.match(low, pos)
    if m is None:
        return None
    said = m.group("n")
    number = _ORDINAL_WORDS.get(said) or int(said)
    if number == 0:
        return None
    end = m.end()
    latin = _LATIN.match(low, end)
    if latin:
        return f"{number} {latin.group(1)}", latin.end()
    named = _LETTER_NAME.match(low, end)
    if named:
        return f"{number}-{_LETTER_NAMES[named.group(1)]}", named.end()
    joined = _LETTER_JOINED.match(low, end)
    if joined:
        letter = joined.group(1) or joined.group(2)
        if letter != "o":  # "12o" is an ordinal mark typed as a letter
            return f"{number}-{letter.upper()}", joined.end()
    spaced = _LETTER_SPACED.match(low, end)
    if spaced and _is_article_letter(original, low, spaced):
        return f"{number}-{spaced.group(1).upper()}", spaced.end()
    return str(number), end


def _is_article_letter(original: str, low: str, spaced: re.Match[str]) -> bool:
    """Whether "12 a" is article 12-A, not 12 followed by the word "a" (or "y", "e", "o", "u")."""
    letter = spaced.group(1)
    if letter in "yeou":
        return False
    if letter == "a":
        return original[spaced.start(1)] == "A" or _AFTER_LETTER_A.match(low, spaced.end()) is not None
    return True
