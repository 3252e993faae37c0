"""Corrections without an LLM: explicit correction and retraction intents in a user message.

Without an LLM (or when its answer falls back), every user message would be a new memory, so
"please forget that I'm vegetarian" would leave "I'm vegetarian" current. Here a message's own
syntax says when it corrects or retracts something the user said before:

- retraction (DELETE): "forget that I …", "I no longer …", "I'm not … anymore",
  "I don't … anymore", "it's no longer true that I …", "I … — that's no longer true";
- correction (UPDATE): "actually, I …" / "correction: my …", and, for facts a person has one of
  at a time (where they live, where or as what they work), "I moved to …", "I now live in …",
  "I work at … now".

The intent names a claim in the first person ("I am vegetarian", "I live in Osaka"). Its target
is the one current memory, among those shown to the extractor, that says the same kind of thing
as the claim and nothing else (one clause, the same subject and predicate), and is at least
`threshold` cosine-similar to it, said by the message's speaker. A retraction's target also
contains every content word of the claim; a correction's says something different, not just
less. Anything else (a question, someone else's fact, a pronoun with no subject, "also", a
memory of two facts, no such memory, two that fit) is no intent or no target: the message
stays an ADD. English only; the rules come from English syntax alone
(bench/corrections.py measures them on a set written for this project).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from app.ingest.domain import Candidate


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _words(text: str) -> frozenset[str]:
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

# A subject the user can correct: themselves, or something of theirs ("my sister").
_SUBJECT = r"(?P<subject>i|my(?: [\w']+){1,3}?)"
# "Please", "can you" and the like before an imperative.
_POLITE = (
    r"(?:(?:please|pls|kindly|can you|could you|would you|will you|just|and|also|oh|ok|okay)[ ,]+)*"
)
# Words that open a correction of what was said before.
_CORRECTION_MARKER = (
    r"(?:actually|correction|to correct myself|let me correct that|i misspoke|i was wrong|"
    r"sorry,? i meant|i meant to say|scratch that|no wait|wait)"
)
_REPORTED = _compile(r"^(?:i (?:said|told you|mentioned)(?: that)? )")
# Words that add to what was said rather than replace it.
_ADDITIVE = _compile(r"\b(?:also|too|as well|another|again|either|more)\b")
# Verbs of knowing and remembering: "I no longer remember …" says nothing about a fact.
_MENTAL = _compile(
    r"^(?:remember|recall|know|understand|think|believe|recognise|recognize|need|want|"
    r"have to|care|mind|feel like|see|hear|get)\b"
)
# An object that only points back ("I love it"): the claim names no fact of its own.
_POINTER = _compile(r"^(?:it|that|this|them|those|these|so|one)$")
# Adverbs of time that tell a change, dropped from the claim.
_NOW = _compile(r"\b(?:now|nowadays|these days|anymore|any more|at the moment|currently)\b")
_STOPWORDS = _words(
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
_SINGLE_VALUED = ("reside", "work at", "work as")
_FRAMES = (
    ("reside", _compile(_RESIDE)),
    ("work at", _compile(_WORK_AT)),
    ("work as", _compile(_WORK_AS)),
)
_AUXILIARY = _compile(
    r"^(?:(?:have|has|had) (?=been |\w+ed |\w+en |got )|am |is |are |was |were |will "
    r"|been |just |recently |finally |now |still |also |currently )"
)
# Words a "my …" subject ends before, and words that cannot start a predicate.
_VERB_START = _words(
    "is are was were has have had do does did no not never still now also just "
    "currently live lives lived living work works worked working moved"
)
_NOT_VERBS = _words("a an the to in at on of for with and or but not no my me it")
_PREPOSITIONS = ("in", "at", "for", "to", "with", "on", "as", "from", "of", "about")
_OPENERS = _compile(
    r"^(?:(?:hi|hey|hello|well|so|oh|yes|yeah|ok|okay|and|but|btw|by the way)\b[ ,!]*)+"
)


REPLACE_RULE = "no longer, now"


@dataclass(frozen=True, slots=True)
class Intent:
    """What the message asks: UPDATE a memory to `content`, or DELETE it; `claim` is the
    first-person statement the target must say, `rule` the syntax that said so."""

    op: str
    rule: str
    claim: str
    content: str | None = None

    @property
    def claim_is_held(self) -> bool:
        """The claim is what the user held until now (the target must say it), not the new
        statement (the target must say something else of the same kind)."""
        return self.op == "DELETE" or self.rule == REPLACE_RULE


@dataclass(frozen=True, slots=True)
class Correction:
    intent: Intent
    target: Candidate
    similarity: float

    @property
    def reason(self) -> str:
        return (
            f"correction without an LLM: rule {self.intent.rule!r}, cosine "
            f"{self.similarity:.3f} to the memory"
        )


def normalise(text: str) -> str:
    """Straight quotes, contractions spelt out, single spaces; the case is kept (a correction
    is stored in the user's words)."""
    text = text.translate(_QUOTES).strip()
    for pattern, replacement in _CONTRACTIONS:
        text = re.sub(pattern, replacement, text, flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", text)


def _clean(claim: str) -> str:
    """The claim without trailing punctuation, "now"-like adverbs and a repeated space."""
    claim = _NOW.sub(" ", claim)
    claim = re.sub(r"\s+", " ", claim).strip(" ,.!;:-\u2014")
    return claim


def _first_person(claim: str) -> bool:
    return _FIRST_PERSON.match(claim) is not None


_FIRST_PERSON = _compile(r"^(?:i|my) \S")
_POLITE_REQUEST = _compile(rf"^{_POLITE}(?:can|could|would|will) you ")
_FORGET = _compile(
    rf"^{_POLITE}(?:forget|disregard|delete|remove|erase|drop) "
    r"(?:that|the fact that|about the fact that|it that) (?P<claim>[a-z].*)$"
)
_NOT_TRUE_BEFORE = _compile(
    r"^it is (?:no longer|not) (?:true|the case)(?: anymore| any more)? that (?P<claim>.+)$"
)
_NOT_TRUE_AFTER = _compile(
    r"^(?P<claim>.+?)[ ,\-\u2014]+(?:that|this|which) is (?:no longer|not) (?:true|the case)"
    r"(?: anymore| any more)?$"
)
_NO_LONGER_BE = _compile(rf"^{_SUBJECT} (?P<be>am|is|are) no longer (?P<rest>.+)$")
_NO_LONGER = _compile(rf"^{_SUBJECT} no longer (?P<rest>.+)$")
_NOT_ANYMORE_BE = _compile(
    rf"^{_SUBJECT} (?P<be>am|is|are) not (?P<rest>.+?) (?:anymore|any more)(?P<after>, .+)?$"
)
_NOT_ANYMORE = _compile(
    rf"^{_SUBJECT} (?:do|does) not (?P<rest>.+?) (?:anymore|any more)(?P<after>, .+)?$"
)
_ACTUALLY = _compile(rf"^{_CORRECTION_MARKER}[ ,:;!.\-\u2014]+(?P<claim>.+)$")
_MOVED = _compile(
    r"^i (?:have )?(?:just |recently |finally |now )?(?:moved|relocated)(?: back)? to "
    r"(?P<place>.+)$"
)
_NOW_SINGLE = _compile(
    r"^(?:i now|now i|i am now|these days i|nowadays i) (?P<rest>.+)$|^i (?P<tail>.+) now$"
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!;])\s+|\n+", text) if s.strip()]


def detect_intent(message: str) -> Intent | None:
    """The correction or retraction the message states in so many words, else None."""
    text = normalise(message)
    polite_request = _POLITE_REQUEST.match(text) is not None
    if "?" in text and not polite_request:
        return None  # a question asks; it does not correct
    sentences = [_OPENERS.sub("", s).rstrip(" .!?") for s in _sentences(text.replace("?", "."))]
    intents = [intent for s in sentences if (intent := _sentence_intent(s)) is not None]
    if len(intents) != 1:
        return None  # none, or more than one thing at once: not certain enough
    return intents[0]


def _sentence_intent(sentence: str) -> Intent | None:
    return _retraction(sentence) or _correction(sentence)


def _retraction(sentence: str) -> Intent | None:
    match = _FORGET.match(sentence)
    if match:
        claim = _REPORTED.sub("", match["claim"])
        return _delete("forget that", claim)
    for pattern in (_NOT_TRUE_BEFORE, _NOT_TRUE_AFTER):
        match = pattern.match(sentence)
        if match:
            return _delete("no longer true", _REPORTED.sub("", match["claim"]))
    for pattern in (_NO_LONGER_BE, _NOT_ANYMORE_BE, _NO_LONGER, _NOT_ANYMORE):
        match = pattern.match(sentence)
        if match:
            old, new = _then_now(match["rest"] + (match.groupdict().get("after") or ""))
            if "be" in match.groupdict():
                old_claim = f"{match['subject']} {match['be']} {old}"
            elif _MENTAL.match(old):
                return None  # "I no longer remember …"
            else:
                old_claim = f"{match['subject']} {_third_person(match['subject'], old)}"
            return _replace(old_claim, new) if new else _delete("no longer", old_claim)
    return None


def _then_now(rest: str) -> tuple[str, str | None]:
    """ "live in Tokyo, I live in Osaka now" -> ("live in Tokyo", "I live in Osaka");
    "play tennis, it hurts" -> ("play tennis", "it hurts") (no first person: no replacement)."""
    parts = re.split(r",? but |, (?:and )?|; ", rest, maxsplit=1)
    if len(parts) == 1:
        return rest, None
    return parts[0], _clean(parts[1])


def _replace(old_claim: str, new_claim: str) -> Intent | None:
    """ "I no longer X, I Y now": an UPDATE of the memory that says X (found as a retraction
    finds its target) to Y, when both say the same kind of thing; else nothing certain."""
    if not _first_person(new_claim):
        return _delete("no longer", old_claim)  # "I no longer play tennis, it hurts my knee"
    old, new = _delete(REPLACE_RULE, old_claim), _update(REPLACE_RULE, new_claim, False)
    if old is None or new is None or frame_of(old.claim) != frame_of(new.claim):
        return None
    return Intent(op="UPDATE", rule=REPLACE_RULE, claim=old.claim, content=new.content)


def _third_person(subject: str, rest: str) -> str:
    """ "my sister no longer work…": the verb after a third-person subject takes its -s
    ("no longer" keeps it already; "does not" drops it)."""
    if subject.lower() == "i" or not rest:
        return rest
    verb, _, tail = rest.partition(" ")
    if verb.endswith("s"):
        return rest
    verb = verb + ("es" if verb.endswith(("sh", "ch", "o", "x")) else "s")
    return f"{verb} {tail}".strip()


def _delete(rule: str, claim: str) -> Intent | None:
    claim = _clean(claim)
    if not _first_person(claim) or _POINTER.match(claim.split(" ", 1)[-1]):
        return None
    return Intent(op="DELETE", rule=rule, claim=claim)


def _correction(sentence: str) -> Intent | None:
    match = _ACTUALLY.match(sentence)
    if match:
        claim = _clean(_REPORTED.sub("", match["claim"]))
        return _update("actually", claim, single_valued_only=False)
    match = _MOVED.match(sentence)
    if match:
        place = _clean(match["place"])
        # Compared as where the user lives: what a memory of a home says.
        return _update("moved to", f"I moved to {place}", True, claim=f"I live in {place}")
    if _NOW_SINGLE.match(sentence):
        return _update("now", _clean(_OPENERS.sub("", _NOW.sub(" ", sentence).strip())), True)
    return None


# "…, not Tokyo": what the correction is not, left out of what it stores.
_NOT_TAIL = _compile(r",? (?:and |but )?not [^,]+$")
_PLACE = _compile(r"\b(?:in|to|at|for|by) (?P<word>[\w']+)")
_VAGUE = _words("a an my our his her their your home it this that")


def _update(
    rule: str, statement: str, single_valued_only: bool, claim: str | None = None
) -> Intent | None:
    """An UPDATE to `statement` ("I live in Osaka, not Tokyo" stored as "I live in Osaka"),
    matched by `claim` (the statement unless given)."""
    statement = _NOT_TAIL.sub("", statement)
    claim = statement if claim is None else claim
    if not _first_person(claim) or _ADDITIVE.search(claim):
        return None
    frame = frame_of(claim)
    if frame is None or (single_valued_only and frame[1] not in _SINGLE_VALUED):
        return None
    if _POINTER.match(claim.split(" ")[-1]) and len(claim.split(" ")) <= 4:
        return None  # "actually I love it": nothing of its own to store
    if single_valued_only and frame[1] != "work as" and _vague_place(claim):
        return None  # "I moved to a new team", "I work at my desk now": no place named
    return Intent(op="UPDATE", rule=rule, claim=claim, content=claim_as_said(statement))


def _vague_place(claim: str) -> bool:
    """The object after the predicate's preposition is no named place or employer."""
    match = _PLACE.search(claim)
    return match is None or match["word"].lower() in _VAGUE


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
        clause = _OPENERS.sub("", clause.strip())
        if not clause:
            continue
        frame = frame_of(clause)
        if frame is None and frames:
            frame = frame_of(f"{frames[-1][0]} {clause}")
        if frame is not None:
            frames.append(frame)
    return frames


def _content_words(text: str) -> set[str]:
    words = re.findall(r"[a-z0-9]+", _NOW.sub(" ", text).lower())
    return {w for w in words if w not in _STOPWORDS}


def _same_word(a: str, b: str) -> bool:
    """Word forms of one word ("plays"/"play", "vegetarian"/"vegetarians")."""
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def _says_claim(claim: str, content: str) -> bool:
    words = _content_words(content)
    return all(any(_same_word(c, w) for w in words) for c in _content_words(claim))


def find_target(
    intent: Intent,
    candidates: list[Candidate],
    similarities: Mapping[UUID, float],
    threshold: float,
    speaker: str | None = None,
) -> Correction | None:
    """The one current memory the intent is about (see the module docstring), else None.
    `similarities`: each candidate's cosine to the claim; `speaker`: the message's (a memory
    another speaker said is about someone else, whatever its words)."""
    claim_frame = frame_of(intent.claim)
    if claim_frame is None:
        return None
    eligible = []
    for candidate in candidates:
        similarity = similarities.get(candidate.memory_id)
        if similarity is None or candidate.speaker != speaker:
            continue
        frames = memory_frames(candidate.content)
        if frames != [claim_frame]:
            continue
        if intent.claim_is_held and not _says_claim(intent.claim, candidate.content):
            continue
        if intent.content is not None and (
            _says_claim(intent.content, candidate.content)
            or _says_claim(candidate.content, intent.content)
        ):
            continue  # says it already, or the message adds to it: nothing to correct
        eligible.append((similarity, candidate))
    eligible.sort(key=lambda pair: pair[0], reverse=True)
    if not eligible or eligible[0][0] < threshold:
        return None
    if len(eligible) > 1 and eligible[1][0] >= threshold:
        return None  # two memories fit: which one is meant is not certain
    similarity, target = eligible[0]
    return Correction(intent, target, similarity)
