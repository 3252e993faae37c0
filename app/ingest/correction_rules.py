"""The syntax of a correction or a retraction: the intent a user message states in so many
words (app/ingest/corrections.py, the module docstring, lists the rules), with the claim its
target must say or the content that replaces it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.ingest.claims import (
    NOW,
    OPENERS,
    SINGLE_VALUED,
    claim_as_said,
    compile_rule,
    frame_of,
    normalise,
    word_set,
)

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
_REPORTED = compile_rule(r"^(?:i (?:said|told you|mentioned)(?: that)? )")
# Words that add to what was said rather than replace it.
_ADDITIVE = compile_rule(r"\b(?:also|too|as well|another|again|either|more)\b")
# Verbs of knowing and remembering: "I no longer remember …" says nothing about a fact.
_MENTAL = compile_rule(
    r"^(?:remember|recall|know|understand|think|believe|recognise|recognize|need|want|"
    r"have to|care|mind|feel like|see|hear|get)\b"
)
# An object that only points back ("I love it"): the claim names no fact of its own.
_POINTER = compile_rule(r"^(?:it|that|this|them|those|these|so|one)$")

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


def _clean(claim: str) -> str:
    """The claim without trailing punctuation, "now"-like adverbs and a repeated space."""
    claim = NOW.sub(" ", claim)
    claim = re.sub(r"\s+", " ", claim).strip(" ,.!;:-\u2014")
    return claim


def _first_person(claim: str) -> bool:
    return _FIRST_PERSON.match(claim) is not None


_FIRST_PERSON = compile_rule(r"^(?:i|my) \S")
_POLITE_REQUEST = compile_rule(rf"^{_POLITE}(?:can|could|would|will) you ")
_FORGET = compile_rule(
    rf"^{_POLITE}(?:forget|disregard|delete|remove|erase|drop) "
    r"(?:that|the fact that|about the fact that|it that) (?P<claim>[a-z].*)$"
)
_NOT_TRUE_BEFORE = compile_rule(
    r"^it is (?:no longer|not) (?:true|the case)(?: anymore| any more)? that (?P<claim>.+)$"
)
_NOT_TRUE_AFTER = compile_rule(
    r"^(?P<claim>.+?)[ ,\-\u2014]+(?:that|this|which) is (?:no longer|not) (?:true|the case)"
    r"(?: anymore| any more)?$"
)
_NO_LONGER_BE = compile_rule(rf"^{_SUBJECT} (?P<be>am|is|are) no longer (?P<rest>.+)$")
_NO_LONGER = compile_rule(rf"^{_SUBJECT} no longer (?P<rest>.+)$")
_NOT_ANYMORE_BE = compile_rule(
    rf"^{_SUBJECT} (?P<be>am|is|are) not (?P<rest>.+?) (?:anymore|any more)(?P<after>, .+)?$"
)
_NOT_ANYMORE = compile_rule(
    rf"^{_SUBJECT} (?:do|does) not (?P<rest>.+?) (?:anymore|any more)(?P<after>, .+)?$"
)
_ACTUALLY = compile_rule(rf"^{_CORRECTION_MARKER}[ ,:;!.\-\u2014]+(?P<claim>.+)$")
_MOVED = compile_rule(
    r"^i (?:have )?(?:just |recently |finally |now )?(?:moved|relocated)(?: back)? to "
    r"(?P<place>.+)$"
)
_NOW_SINGLE = compile_rule(
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
    sentences = [OPENERS.sub("", s).rstrip(" .!?") for s in _sentences(text.replace("?", "."))]
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
        return _update("now", _clean(OPENERS.sub("", NOW.sub(" ", sentence).strip())), True)
    return None


# "…, not Tokyo": what the correction is not, left out of what it stores.
_NOT_TAIL = compile_rule(r",? (?:and |but )?not [^,]+$")
_PLACE = compile_rule(r"\b(?:in|to|at|for|by) (?P<word>[\w']+)")
_VAGUE = word_set("a an my our his her their your home it this that")


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
    if frame is None or (single_valued_only and frame[1] not in SINGLE_VALUED):
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
