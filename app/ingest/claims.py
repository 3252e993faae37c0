"""The words and shapes of a first-person claim, as the rules of corrections read them
(app/ingest/correction_rules.py finds a claim in a message, app/ingest/corrections.py the
memory it is about): text normalised, the frame (subject, predicate) of a clause, and whether
one text says every content word of another. English only.
"""

from __future__ import annotations

import re


def compile_rule(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Contractions the rules read in their long form.
_CONTRACTIONS = (
    (r"\bi'm\b", "I am"),
    (r"\bi've\b", "I have"),
    (r"\bi'd\b", "I would"),
    (r"\bi'll\b", "I will"),
    (r"\bcan't\b", "can not"),
    (r"\bwon't\b", "will not"),
    (r"\b(\w+)n't\b", r"\1 not"),
    (r"\b(that|it|what|he|she)'s\b", r"\1 is"),
)
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})

# Adverbs of time that tell a change, dropped from the claim.
NOW = compile_rule(r"\b(?:now|nowadays|these days|anymore|any more|at the moment|currently)\b")
_STOPWORDS = word_set(
    "a an the i my me am is are was were be been to in at on of for with and or but "
    "not no do does did have has had that this it very really just so as by from"
)

# Predicates people hold one of at a time: a bare "I moved to X" replaces the old one.
_RESIDE = (
    r"(?:live|lives|living|reside|resides|residing|based|moved|relocated)(?: back)? (?:in|to|at)\b"
)
_WORK_AT = (
    r"(?:work|works|working|employed|got a (?:new )?job|have a (?:new )?job|started working)"
    r" (?:at|for|by)\b"
)
_WORK_AS = r"(?:work|works|working|started working) as"
SINGLE_VALUED = ("reside", "work at", "work as")
_FRAMES = (
    ("reside", compile_rule(_RESIDE)),
    ("work at", compile_rule(_WORK_AT)),
    ("work as", compile_rule(_WORK_AS)),
)
_AUXILIARY = compile_rule(
    r"^(?:(?:have|has|had) (?=been |\w+ed |\w+en |got )|am |is |are |was |were |will "
    r"|been |just |recently |finally |now |still |also |currently )"
)
# Words a "my …" subject ends before, and words that cannot start a predicate.
_VERB_START = word_set(
    "is are was were has have had do does did no not never still now also just "
    "currently live lives lived living work works worked working moved"
)
_NOT_VERBS = word_set("a an the to in at on of for with and or but not no my me it")
_PREPOSITIONS = ("in", "at", "for", "to", "with", "on", "as", "from", "of", "about")
OPENERS = compile_rule(
    r"^(?:(?:hi|hey|hello|well|so|oh|yes|yeah|ok|okay|and|but|btw|by the way)\b[ ,!]*)+"
)


def normalise(text: str) -> str:
    """Straight quotes, contractions spelt out, single spaces; the case is kept (a correction
    is stored in the user's words)."""
    text = text.translate(_QUOTES).strip()
    for pattern, replacement in _CONTRACTIONS:
        text = re.sub(pattern, replacement, text, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", text)


def claim_as_said(claim: str) -> str:
    """The stored content of a correction: the user's statement, as a sentence."""
    return claim[:1].upper() + claim[1:]


def frame_of(clause: str) -> tuple[str, str] | None:
    """(subject, predicate) of a first-person clause: ("i", "reside"), ("my sister", "be"),
    ("i", "be allergic to"), ("i", "play"); None when it has no such shape."""
    words = clause.lower().split(" ")
    if words[0] == "i":
        subject, rest = "i", " ".join(words[1:])
    elif words[0] == "my" and len(words) > 2:
        # "my favourite colour is": the subject runs to its verb (else one noun long).
        end = next((i for i in range(2, min(len(words), 5)) if words[i] in _VERB_START), 2)
        subject, rest = " ".join(words[:end]), " ".join(words[end:])
    else:
        return None
    if not rest:
        return None
    for name, pattern in _FRAMES:
        if pattern.match(_AUXILIARY.sub("", _AUXILIARY.sub("", rest))):
            return subject, name
    words = rest.split(" ")
    if words[0] in ("am", "is", "are", "was", "were"):
        return subject, _be_frame(words[1:])
    verb_words = _AUXILIARY.sub("", _AUXILIARY.sub("", rest)).split(" ")
    verb = verb_words[0]
    if verb in _NOT_VERBS or not verb.isalpha():
        return None
    lemma = verb[:-1] if subject != "i" and verb.endswith("s") and len(verb) > 3 else verb
    if len(verb_words) > 1 and verb_words[1] in _PREPOSITIONS:
        lemma = f"{lemma} {verb_words[1]}"
    return subject, lemma


def _be_frame(words: list[str]) -> str:
    """ "be a" (what someone is), "be allergic to" (a relation), else "be" (a quality)."""
    if not words:
        return "be"
    if words[0] in ("a", "an"):
        return "be a"
    if len(words) > 1 and words[1] in _PREPOSITIONS:
        return f"be {words[0]} {words[1]}"
    if words[0] in _PREPOSITIONS:
        return f"be {words[0]}"
    return "be"


def memory_frames(content: str) -> list[tuple[str, str]]:
    """The frames of a stored memory's clauses (a memory of one fact has one). A clause with
    no subject of its own ("… and work at Sony") has the one before it."""
    clauses = re.split(r"[.;!?,]+|\s+(?:and|but|so|because)\s+", normalise(content))
    frames: list[tuple[str, str]] = []
    for clause in clauses:
        clause = OPENERS.sub("", clause.strip())
        if not clause:
            continue
        frame = frame_of(clause)
        if frame is None and frames:
            frame = frame_of(f"{frames[-1][0]} {clause}")
        if frame is not None:
            frames.append(frame)
    return frames


def _content_words(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9]+", NOW.sub(" ", text).lower())
    return {w for w in words if w not in _STOPWORDS}


def _same_word(a: str, b: str) -> bool:
    """Word forms of one word ("plays"/"play", "vegetarian"/"vegetarians")."""
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def says_claim(claim: str, content: str) -> bool:
    words = _content_words(content)
    return all(any(_same_word(c, w) for w in words) for c in _content_words(claim))
