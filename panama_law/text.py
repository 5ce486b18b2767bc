"""Spanish text handling shared by the index and the query: accent folding, tokens, stopwords, stems.

Spoken questions arrive without accents, with typos and in colloquial forms, while the Constitution is formal and
accented; folding both sides to the same unaccented, lowercased, stemmed form is what lets them meet. The stopword
list also drops conversational filler ("oiga", "es legal", "cuánto", "en Panamá", "se puede"), which carries no
legal meaning but would otherwise match the text by accident ("cuánto" → "cuantía") and inflate the lexical
evidence the abstain rule relies on.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import Stemmer

_TOKEN = re.compile(r"[a-z0-9ñ]+")
_STEMMER = Stemmer.Stemmer("spanish")

# Function words and question fillers that carry no legal meaning. Kept folded (no accents).
STOPWORDS: frozenset[str] = frozenset(
    """
    a al algo alguien alguna algunas alguno algunos ante antes aqui asi aun cada casi como con contra cual cuales
    cualquier cuando de del desde donde dos el ella ellas ello ellos en entre era eran es esa esas ese eso esos esta
    estaba estan estar este esto estos fue fueron ha habia han hasta hay la las le les lo los mas me mi mis
    mucho muy nada ni no nos nosotros o os otra otras otro otros para pero poco por porque que quien quienes se sea
    sean segun ser si sido sin sobre solo son su sus tal tambien te tiene tienen todo todos tu tus un una uno unos
    unas usted ustedes y ya yo eh pues pa pal oiga mire bueno entonces osea tipo puedo puede pueden podemos hacer
    hace tengo tienes tenemos quiero quieres queremos saber dice dicen vez veces mismo misma cosa cosas
    ok dale hola favor gracias digame diga necesito ayuda pregunta
    cuanto cuanta cuantos cuantas legal ilegal pasa pasaria panama hoy aca alla ahi ahora rato acaso verdad cierto
    oye oigan fijese sabe sabes quisiera gustaria podria podrian deberia seria eso esto asunto
    """.split()
)


@lru_cache(maxsize=4096)
def fold(text: str) -> str:
    """Lowercase and strip accents, keeping ñ (it changes meaning: año/ano)."""
    text = text.lower().replace("ñ", "\x00")
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return stripped.replace("\x00", "ñ")


def words(text: str) -> list[str]:
    """Folded word tokens, stopwords included (phrase lookup in the lexicon needs them)."""
    return _TOKEN.findall(fold(text))


_SOUNDS = (
    (re.compile(r"v"), "b"),
    (re.compile(r"z"), "s"),
    (re.compile(r"c(?=[ei])"), "s"),
    (re.compile(r"ll"), "y"),
    (re.compile(r"^h"), ""),
    (re.compile(r"qu(?=[ei])"), "k"),
    (re.compile(r"ñ"), "n"),
)


def sound_fold(term: str) -> str:
    """Merge spellings that sound alike in Latin American Spanish (b/v, s/z/c, ll/y, silent h), and ñ with n.

    Questions are spoken (speech-to-text guesses the spelling) or typed in a hurry: "vienes" for "bienes",
    "aser" for "hacer", "anos" for "años". Applied to stems on both sides, so it costs nothing when the spelling
    is right.
    """
    for pattern, repl in _SOUNDS:
        term = pattern.sub(repl, term)
    return term


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return sound_fold(_STEMMER.stemWord(word))


def terms(text: str) -> list[str]:
    """Index terms: folded, stopwords removed, Spanish-stemmed."""
    return [stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 1]
