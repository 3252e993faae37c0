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
from app.ingest.claims import normalise

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
    "persists",
    "old_value_kept",
    "memory_part",
    "acquires_only",
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
    # the other leg or a follow-up of a kind: a second one, not a change of the first
    r"(?:back|home) from",
    r"return\w*",
    r"follow-up",
    r"one more",
    r"on top of",
    r"alongside",
    r"after that",
)
# Getting one more of something: "bought", "opened", "adopted", "signed up". Alone (nothing
# given up, nothing "now" or "instead") it adds a thing beside the one the memory names.
_ACQUIRE = _cue(
    r"bought",
    r"opened",
    r"adopted",
    r"got (?:a|an|another|some)",
    r"picked up",
    r"signed up",
    r"took up",
    r"added",
    r"booked",
    r"enrolled",
    r"subscribed",
)
# The fact stands: "still", "staying", "the same", "went back to".
_PERSISTS = _cue(
    r"still",
    r"stay\w*",
    r"remain\w*",
    r"(?:the )?same",
    r"unchanged",
    r"keep(?:ing)?",
    r"kept",
    r"went back to",
    r"nothing chang\w*",
    r"(?:not|never) chang\w*",
)
# "X's Y", "the Y of the X": a thing's part or property (the Tesla's tyres, the roof of the shed).
_OWNED = re.compile(r"\b([\w-]+)'s ([\w-]+)|\bthe ([\w-]+) (?:of|on|in) (?:the|my|our) ([\w-]+)")
# The old value left behind: "from Austin", "instead of tennis", "after eight years at X".
_LEFT_BEHIND = _cue(r"from", r"instead of", r"rather than", r"after", r"out of", r"behind")
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
    # a milestone is an event of the fact, not its end: "my first sale", "for the first time"
    r"(?:my|our|the) first",
    r"for the first time",
)
_QUESTION_START = re.compile(
    r"^(?:who|what|when|where|which|why|how|is|are|do|does|did|can|could|should|would|will)\b",
    re.IGNORECASE,
)
# Person words, each its own person but for synonyms ("mum" is "mother", "boss" is "manager").
# People whose own facts a user tells (relatives, friends, colleagues, neighbours) and roles who
# mostly act on the user's (the dentist moves the user's appointment, the boss their shifts):
# only the first can make a sentence another person's fact (`about_someone_else`).
_SYNONYMS = {
    "mother": "mom mum mommy mummy",
    "father": "dad daddy",
    "partner": "spouse wife husband boyfriend girlfriend fiance fiancee",
    "child": "kid kids children baby",
    "friend": "friends bff",
    "colleague": "colleagues coworker coworkers co-worker teammate teammates",
    "neighbour": "neighbours neighbor neighbors",
    "housemate": "housemates roommate roommates flatmate flatmates",
    "sibling": "siblings",
    "parents": "folks",
    "grandparent": "grandparents grandma grandpa grandmother grandfather granny",
    "grandchild": "grandchildren grandkids grandson granddaughter",
    "manager": "boss supervisor",
    "teacher": "tutor coach instructor trainer professor",
}
_PEOPLE = (
    "son daughter sister brother cousin cousins uncle aunt auntie niece nephew in-laws stepmom "
    "stepdad stepson stepdaughter ex"
)
_ROLES = "doctor dentist therapist physio landlord landlady"
PERSON_GROUP = {
    **{word: word for word in [*_SYNONYMS, *_PEOPLE.split(), *_ROLES.split()]},
    **{word: group for group, words in _SYNONYMS.items() for word in words.split()},
}
_ROLE_GROUPS = frozenset(["manager", "teacher", *_ROLES.split()])
_PERSON_WORD = "|".join(sorted(map(re.escape, PERSON_GROUP), key=len, reverse=True))
_PERSON = re.compile(
    rf"\b(?:my|our|his|her|their) (?:[\w-]+ )??(?P<who>{_PERSON_WORD})\b", re.IGNORECASE
)
# The subject a sentence starts with: a person word owned by someone ("my cousin Ferdinand",
# "our neighbours", "my sister's manager"), also after a short opening ("Honestly,", "Change of
# plans:", "So"), or he/she/they as its first word ("Ilya changed schools, he's …" is Ilya's);
# `rest` is what follows it.
_FILLER = r"(?:(?:so|well|oh|and|but|btw|anyway|also|guess what) )?"
_SUBJECT = re.compile(
    rf"^(?:(?:[^,:;]{{1,30}}[,:;] )?{_FILLER}(?:my|our) (?:[\w-]+ )??(?P<who>{_PERSON_WORD})"
    rf"(?:'s)?\b|{_FILLER}(?P<pronoun>he|she|they)\b)(?P<rest>.*)$",
    re.IGNORECASE,
)
# The speaker in the rest of a sentence: "my wife and I …", "… took me off …", "… my lessons".
_SPEAKER = re.compile(r"\b(?:i|me|my|mine|myself|we|us|our|ours)\b", re.IGNORECASE)
# A memory about the speaker: it starts with I, we, my, our ("I live …", "My manager is …").
_FIRST_PERSON_START = re.compile(r"^(?:i|we|my|our)\b", re.IGNORECASE)
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


def memory_part(memory_words: set[str], sentence: str) -> bool:
    """Whether the sentence names a part or property of a thing the memory names ("I got the
    Tesla's tyres replaced" under "I drive a Tesla"): the part changed, the fact stands."""
    for match in _OWNED.finditer(sentence):
        owner, part = (match[1], match[2]) if match[1] else (match[4], match[3])
        owner_words, part_words = _content_words(owner), _content_words(part)
        if owner_words & memory_words and part_words and not part_words & memory_words:
            return True
    return False


def people(text: str) -> set[str]:
    """The groups of the person words a text names with an owner ("my mum" -> mother)."""
    return {PERSON_GROUP[m["who"].lower()] for m in _PERSON.finditer(text)}


def about_someone_else(memory: str, sentence: str) -> str | None:
    """The person the sentence tells a fact of, when that is not the speaker nor anyone the
    memory names: its subject is someone's relative, friend or colleague ("My cousin Ferdinand
    moved to Munich", "Our neighbours moved", "My sister's manager is quitting") or he/she/they
    (against a memory that names no one), not a role that acts on the user's facts (a doctor, a
    landlord, a boss), not named by the memory (synonyms count: "mum" is "mother"), and the
    speaker is not in the rest of it ("my wife and I moved", "the dentist moved my appointment"
    are the speaker's facts). Such a sentence never supersedes the memory, however close its
    topic (precision first; as in Japanese). A memory that is not about the speaker nor names a
    person ("Lotte lives in Ghent") may be about anyone, so nothing is ruled out against it.
    None where the rule does not apply."""
    memory_n, sentence_n = normalise(memory), normalise(sentence)
    found = _SUBJECT.match(sentence_n)
    if found is None or _SPEAKER.search(found["rest"]):
        return None
    memory_people = people(memory_n)
    if not memory_people and not _FIRST_PERSON_START.match(memory_n):
        return None
    if found["pronoun"]:
        # he/she/they may be a person the memory names ("My sister lives in Ghent")
        return None if memory_people else found["pronoun"].lower()
    who = found["who"].lower()
    group = PERSON_GROUP[who]
    return None if group in memory_people or group in _ROLE_GROUPS else who


def pair_features(
    memory: str, sentence: str, cosine: float, next_cosine: float | None, shift: float
) -> list[float] | None:
    """The features of one (memory, sentence) pair, in the order of FEATURES. `next_cosine`: the
    highest cosine of the sentence to any other memory shown (None when it is the only one);
    `shift`: how far the sentence's embedding lies from the memory's along the model's change
    direction (sentence . direction - memory . direction). None for a pair the model does not
    judge (another person's fact: `about_someone_else`)."""
    if about_someone_else(memory, sentence):
        return None
    memory_n, sentence_n = normalise(memory), normalise(sentence)
    memory_words, sentence_words = _content_words(memory_n), _content_words(sentence_n)
    shared = memory_words & sentence_words
    memory_values, sentence_values = _values(memory_n), _values(sentence_n)
    change = len(_CHANGE_VERB.findall(sentence_n))
    ending = len(_ENDING.findall(sentence_n))
    now = len(_NOW_WORD.findall(sentence_n))
    # The old value named again, also as the sentence's first word ("Noor and I …").
    first = _WORD.match(sentence_n.lower())
    old_value = bool((sentence_values | {first.group() if first else ""}) & memory_values)
    additive = len(_ADDITIVE.findall(sentence_n))
    other_person = bool(people(sentence_n) - people(memory_n))
    margin = cosine - next_cosine if next_cosine is not None else cosine
    return [
        cosine,
        margin,
        float(next_cosine is None or cosine >= next_cosine),
        len(shared) / len(memory_words) if memory_words else 0.0,
        float(np.log1p(len(sentence_words - memory_words))),
        float(bool(sentence_values - memory_values)),
        float(old_value),
        float(change),
        float(now),
        float(ending),
        float(additive),
        float(len(_EPISODE.findall(sentence_n))),
        float(_is_question(sentence_n)),
        float(other_person),
        float(len(_PAST.findall(sentence_n))),
        shift,
        cosine * min(change, 2),
        cosine * min(additive, 2),
        float(len(_PERSISTS.findall(sentence_n))),
        # The old value named again, not as one ended or left behind ("Noor and I moved in
        # together" under "I'm seeing Noor"): the memory's fact goes on.
        float(old_value and not ending and not _LEFT_BEHIND.search(sentence_n)),
        float(memory_part(memory_words, sentence_n)),
        float(bool(_ACQUIRE.search(sentence_n)) and not (change or now or ending)),
    ]
