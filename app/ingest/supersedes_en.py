"""The English supersedes model's features: how close a (memory, sentence) pair is, what the two
share in words, and what the sentence says about change and time, as counts of general English
cue words whose weights are learned (app/ingest/supersedes.py decides with them).

- how close the two are: the 768D cosine, the margin over the next closest memory shown, whether
  it is the closest; a new fact about the same thing as a memory sits near it;
- how much they share in words: the share of the memory's content words the sentence repeats
  (an update keeps the subject and predicate and changes the value), and whether the sentence
  names a new value (a name or a number the memory lacks) or the old one;
- change verbs ("switched", "sold", "rescheduled"), "now"-words ("these days", "anymore",
  "since"), endings ("passed away", "paid off"), additions ("also", "another", "as well"),
  one-off episodes ("yesterday", "a trip"), a question, and a person the memory does not
  mention ("my sister …" under "I work at …").
"""

from __future__ import annotations

import re

import numpy as np

from app.ingest import supersedes_ja
from app.ingest.corrections import normalise

FEATURES = (
    *supersedes_ja.SHARED_FEATURES,
    "change_verb",
    "now_word",
    "ending",
    "additive",
    "episode",
    "question",
    "other_person",
    "past_tense",
    "change_direction",
    "cosine_x_change",
    "cosine_x_additive",
)


def _cue(*phrases: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(phrases) + r")\b", re.IGNORECASE)


# General English cue words (not taken from the training pairs): their weights are learned.
_CHANGE_VERB = _cue(
    r"mov(?:e|ed|ing)",
    r"relocat\w*",
    r"switch\w*",
    r"chang\w*",
    r"replac\w*",
    r"swap\w*",
    r"trad(?:e|ed|ing) in",
    r"upgrad\w*",
    r"transferr\w*",
    r"resched\w*",
    r"postpon\w*",
    r"push(?:ed)? (?:back|to)",
    r"cancel+ed",
    r"quit",
    r"left",
    r"retir\w*",
    r"sold",
    r"gave up",
    r"given up",
    r"stopped",
    r"dropped",
    r"became",
    r"joined",
    r"start(?:ed|s)",
    r"took up",
    r"went (?:up|down|back)",
    r"raised",
    r"cut down",
    r"turned",
    r"migrated",
    r"convert\w*",
    r"downgrad\w*",
    r"rebook\w*",
    r"refinanc\w*",
    r"promot\w*",
    r"hired",
    r"fired",
    r"laid off",
    r"closed",
    r"opened",
    r"bought",
    r"got rid of",
    r"new",
    r"decided",
    r"marri\w*",
    r"divorc\w*",
    r"separated",
    r"engaged",
    r"increas\w*",
    r"decreas\w*",
    r"reduc\w*",
    r"lost",
    r"tapered",
    r"recovered",
)
_NOW_WORD = _cue(
    r"now",
    r"nowadays",
    r"these days",
    r"anymore",
    r"any more",
    r"no longer",
    r"any longer",
    r"no more",
    r"instead",
    r"since",
    r"from now on",
    r"as of",
    r"currently",
    r"at last",
    r"finally",
)
_ENDING = _cue(
    r"passed away",
    r"died",
    r"gone",
    r"over",
    r"paid off",
    r"healed",
    r"finished",
    r"ended",
    r"broke up",
    r"split up",
    r"graduated",
    r"former",
    r"ex",
    r"used to",
    r"retired",
    r"out of",
)
_ADDITIVE = _cue(
    r"also",
    r"too",
    r"as well",
    r"another",
    r"second",
    r"both",
    r"in addition",
    r"besides",
    r"extra",
    r"on the side",
    r"each",
)
_EPISODE = _cue(
    r"today",
    r"tonight",
    r"yesterday",
    r"this (?:morning|afternoon|evening)",
    r"last night",
    r"weekend",
    r"visit\w*",
    r"trip",
    r"holiday",
    r"vacation",
    r"conference",
    r"all day",
)
_QUESTION_START = re.compile(
    r"^(?:who|what|when|where|which|why|how|is|are|do|does|did|can|could|should|would|will)\b",
    re.IGNORECASE,
)
_PERSON = re.compile(
    r"\b(?:my|our|his|her) (?P<who>sister|brother|mother|mom|mum|father|dad|parents|wife|"
    r"husband|partner|son|daughter|kids|children|friend|colleague|coworker|neighbou?r|cousin|"
    r"uncle|aunt|niece|nephew|grand\w+|boss|roommate|boyfriend|girlfriend|fianc\w*)\b",
    re.IGNORECASE,
)
_STOPWORD_LIST = (
    "a an the i me my we our us you your he she his her it its they them their to in at on of "
    "for with and or but not no do does did have has had am is are was were be been being that "
    "this these those so as by from up out into about just very really all some any one get got "
    "s t m ve ll d re"
)
_STOPWORDS = frozenset(_STOPWORD_LIST.split())
_WORD = re.compile(r"[a-z0-9]+")
# Past and perfect verb forms: a change is told as an event ("we sold", "I've switched"), a
# memory of a state in the present ("I have", "I drive").
_PAST = re.compile(
    r"\b(?:\w{3,}ed|went|got|gave|took|made|left|sold|bought|became|began|broke|came|found|"
    r"had|lost|quit|ran|told|won|drove|flew|grew|paid|put|sent|spent|met|brought|fell|"
    r"has been|have been|was|were)\b",
    re.IGNORECASE,
)
_VALUE = re.compile(r"(?<![.!?] )(?<!^)\b[A-Z][\w'-]+|\b\d[\d.,:]*")


def _content_words(text: str) -> set[str]:
    """Lower-case content words, cut to a 5-letter stem ("moved"/"moving", "cats"/"cat")."""
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _values(text: str) -> set[str]:
    """Names and numbers: capitalised words after the first word of a sentence, and digits."""
    return {v.lower().strip(".,:") for v in _VALUE.findall(text)}


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or _QUESTION_START.match(sentence) is not None


def pair_features(
    memory: str, sentence: str, cosine: float, next_cosine: float | None, shift: float
) -> list[float]:
    """The features of one (memory, sentence) pair, in the order of FEATURES. `next_cosine`: the
    highest cosine of the sentence to any other memory shown (None when it is the only one);
    `shift`: how far the sentence's embedding lies from the memory's along the model's change
    direction (sentence . direction - memory . direction)."""
    memory_n, sentence_n = normalise(memory), normalise(sentence)
    memory_words, sentence_words = _content_words(memory_n), _content_words(sentence_n)
    shared = memory_words & sentence_words
    memory_values, sentence_values = _values(memory_n), _values(sentence_n)
    change = len(_CHANGE_VERB.findall(sentence_n))
    additive = len(_ADDITIVE.findall(sentence_n))
    memory_people = {m["who"].lower() for m in _PERSON.finditer(memory_n)}
    other_person = any(m["who"].lower() not in memory_people for m in _PERSON.finditer(sentence_n))
    margin = cosine - next_cosine if next_cosine is not None else cosine
    return [
        cosine,
        margin,
        float(next_cosine is None or cosine >= next_cosine),
        len(shared) / len(memory_words) if memory_words else 0.0,
        float(np.log1p(len(sentence_words - memory_words))),
        float(bool(sentence_values - memory_values)),
        float(bool(sentence_values & memory_values)),
        float(change),
        float(len(_NOW_WORD.findall(sentence_n))),
        float(len(_ENDING.findall(sentence_n))),
        float(additive),
        float(len(_EPISODE.findall(sentence_n))),
        float(_is_question(sentence_n)),
        float(other_person),
        float(len(_PAST.findall(sentence_n))),
        shift,
        cosine * min(change, 2),
        cosine * min(additive, 2),
    ]
