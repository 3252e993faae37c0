"""What a memory claims about someone, as far as two claims can contradict each other: the
subject, the relation and its value ("I live in Boston": the speaker, `reside`, {boston}), and
whether the claim says the relation ended ("I stopped learning the violin").

A relation people hold one value of at a time (SINGLE_VALUED: where they live, where and as
what they work, their partner, age, field of study, diet) is contradicted by another value of
it; any relation is contradicted by its own end. Anything else ("I play tennis", "I play
chess") is one fact beside another. English only, and precision first: a claim is read only
from the shapes below, so a sentence of another shape claims nothing (never a contradiction).

app/ingest/claims.py reads the frame (subject, predicate) of a correction without its value;
retrieval may not import ingestion (tests/test_layering.py), and this reading needs the value,
so it is its own module here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

SINGLE_VALUED = frozenset({"reside", "work at", "work as", "partner", "age", "study", "diet"})


@dataclass(frozen=True, slots=True)
class Claim:
    subject: str  # "i" (the memory's speaker), "my sister", or a person's name, lower case
    relation: str  # one of SINGLE_VALUED, else "do <verb>" (a relation of many values)
    value: frozenset[str]  # the value's content words, lower case
    ended: bool = False  # "stopped", "quit", "no longer", "not … anymore"

    @property
    def single_valued(self) -> bool:
        return self.relation in SINGLE_VALUED


def _rule(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'"})
_LONG_FORMS = (
    (_rule(r"\bi'm\b"), "I am"),
    (_rule(r"\bi've\b"), "I have"),
    (_rule(r"\bwe're\b"), "we are"),
    (_rule(r"\bwe've\b"), "we have"),
    (_rule(r"\bcan't\b"), "can not"),
    (_rule(r"\bwon't\b"), "will not"),
    (_rule(r"\b(\w+)n't\b"), r"\1 not"),
    (_rule(r"\b(he|she|it)'s\b"), r"\1 is"),
)
# Clauses: sentences, then the parts joined by a comma or a conjunction.
_CLAUSE_END = _rule(r"[.;!?,]+|\s+(?:and|but|so|because|though|although)\s+(?=i\b|we\b|my\b)")
_OPENER = _rule(r"^(?:(?:hi|hey|hello|well|so|oh|yes|yeah|ok|okay|and|but|btw|actually)\b\s*)+")
_RELATIVE = (
    r"(?:wife|husband|partner|girlfriend|boyfriend|fianc[eé]e?|spouse|mother|mom|mum|father|dad"
    r"|sister|brother|son|daughter|friend|cousin|aunt|uncle|boss|colleague|neighbou?r"
    r"|grandmother|grandma|grandfather|grandpa|niece|nephew|roommate|housemate)"
)
_SUBJECT = re.compile(
    r"^(?:(?P<me>i|we|(?:my|our) \w+ and i)|(?P<my>(?:my|our) (?:\w+ )?" + _RELATIVE + r")"
    r"|(?P<name>[A-Z][a-z]+))\s+(?P<rest>.+)$",
    re.IGNORECASE,
)
_ADVERB_WORDS = "just|recently|finally|now|still|also|currently|actually|already|officially|really"
_ADVERBS = f"(?:{_ADVERB_WORDS})"
_HELPERS = _rule(r"^(?:(?:have|has|had|will|do|does|" + _ADVERB_WORDS + r")\s+)+")
# "am"/"is"/"are": what follows is a state ("34", "a nurse", "vegan", "learning …").
_BE = _rule(r"^(?:" + _ADVERBS + r" )*(?:am|is|are)(?: " + _ADVERBS + r")* (?P<rest>.+)$")
_ENDED = _rule(
    r"^(?:(?:have|has|had)\s+)?(?:stopped|quit|gave up|given up|no longer|not)\s+(?P<rest>.+)$"
)
_AGAIN = _rule(r"\s+(?:anymore|any more|again|these days|nowadays|at the moment|now)$")
# Where a value ends: a time, a companion or a reason after it.
_VALUE_END = _rule(
    r"\s+(?:since|last|this|next|ago|for|with|now|yesterday|today|recently|because|when|after"
    r"|before|until|about|from|in (?:19|20)\d\d|in (?:january|february|march|april|may|june"
    r"|july|august|september|october|november|december))\b.*$"
)
_PLACE = _rule(
    r"^(?:live|lives|living|reside|resides|residing|based|moved|relocated|settled)"
    r"(?: back)? (?:in|to|at|into) (?P<value>.+)$"
)
_MOVED_FROM = _rule(r"^(?:moved|relocated) from .+? to (?P<value>.+)$")
_WORK_AS = _rule(r"^(?:work|works|working|employed|started working) as (?P<value>.+)$")
_WORK_AT = _rule(
    r"^(?:work|works|working|employed|started working|got a (?:new )?job|have a (?:new )?job)"
    r"(?: as .+?)? (?:at|for|by) (?P<value>.+)$"
)
_AS_ROLE_END = _rule(r"\s+(?:at|for|by|in|on)\b.*$")
_AGE = _rule(r"^(?:turned )?(?P<value>\d{1,3})(?: years? old| yrs old)?$")
_STUDY = _rule(r"^(?:study|studying|studies|majoring in|major in) (?P<value>[a-z].*)$")
_DIETS = (
    "vegetarian|vegan|pescatarian|pescetarian|flexitarian|omnivore|carnivore|keto|paleo"
    "|gluten-free|dairy-free|lacto-vegetarian"
)
_DIET = _rule(
    r"^(?:follow |on |eat )?(?:an? |strictly |fully )?(?P<value>" + _DIETS + r")(?: diet)?$"
)
_EATS_MEAT = _rule(r"^eat(?:s|ing)? meat$")
_PARTNERS = r"(?:wife|husband|partner|girlfriend|boyfriend|fianc[eé]e?|spouse)"
_PARTNER_IS = re.compile(
    r"^(?i:my|our) (?i:" + _PARTNERS + r")(?:'s name)? (?i:is) (?i:called |named )?"
    r"(?P<value>[A-Z][a-z]+)$"
)
_PARTNER_OF = re.compile(
    r"^(?:married to|engaged to|dating|seeing|with) (?P<value>[A-Z][a-z]+)$", re.IGNORECASE
)
_JOB_WORDS = (
    r"(?:teacher|nurse|doctor|physician|surgeon|dentist|engineer|developer|programmer|designer"
    r"|architect|lawyer|attorney|accountant|chef|cook|waiter|waitress|barista|pharmacist"
    r"|manager|director|consultant|analyst|scientist|researcher|professor|lecturer|student"
    r"|writer|journalist|editor|photographer|artist|musician|electrician|plumber|carpenter"
    r"|mechanic|driver|pilot|firefighter|police officer|officer|soldier|farmer|librarian"
    r"|therapist|counselor|counsellor|psychologist|paramedic|veterinarian|vet|cashier"
    r"|salesperson|clerk|receptionist|secretary|translator|intern|freelancer|entrepreneur"
    r"|founder|ceo|cto)"
)
_JOB_TITLE = _rule(r"^(?:an? |the )(?P<value>(?:[\w-]+ ){0,2}" + _JOB_WORDS + r")$")
_JOB_SUBJECT = _rule(r"^my (?:job|job title|title|occupation|profession|role) is (?P<value>.+)$")
_STOPWORDS = frozenset(
    re.findall(
        r"\w+",
        "a an the my our your his her their of in at on to for and or as by with from that this "
        "very really just new current",
    )
)


def _long_form(text: str) -> str:
    text = text.translate(_QUOTES)
    for pattern, replacement in _LONG_FORMS if "'" in text else ():
        text = pattern.sub(replacement, text)
    return re.sub(r"\s+", " ", text).strip()


def _words(value: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9-]+", value.lower()) if w not in _STOPWORDS)


def _value(text: str) -> frozenset[str]:
    return _words(_VALUE_END.sub("", _AGAIN.sub("", text)))


_PAST_FORMS = frozenset(
    re.findall(
        r"\w+",
        "got gotten went gone had did done made took taken saw seen met came gave given found "
        "left told thought felt kept began begun bought brought caught taught sold said ran won "
        "lost wrote written read spent sent built",
    )
)


def _past(verb: str) -> bool:
    return verb.endswith("ed") or verb in _PAST_FORMS


def _lemma(verb: str) -> str:
    """A verb's stem, enough to tell "learning" and "learn", "smoking" and "smoke" alike."""
    verb = verb.lower()
    if verb.endswith("ing") and len(verb) > 5:
        verb = verb[:-3]
        if len(verb) > 2 and verb[-1] == verb[-2]:
            verb = verb[:-1]  # "running"
    elif verb.endswith("s") and not verb.endswith("ss") and len(verb) > 3:
        verb = verb[:-1]
    return verb.rstrip("e")


def _slot(rest: str) -> tuple[str, frozenset[str]] | None:
    """The single-valued relation a predicate states with a verb, with its value."""
    for relation, pattern in (("reside", _MOVED_FROM), ("reside", _PLACE)):
        if found := pattern.match(rest):
            return relation, _value(found["value"])
    if found := _WORK_AS.match(rest):
        return "work as", _value(_AS_ROLE_END.sub("", found["value"]))
    if (found := _STUDY.match(rest)) and not found["value"].startswith("for "):  # a test
        return "study", _value(found["value"])
    if found := _AGE.match(_VALUE_END.sub("", rest)):
        return "age", frozenset({found["value"]})
    if found := _DIET.match(rest):
        return "diet", frozenset({found["value"].lower()})
    if _EATS_MEAT.match(rest):
        return "diet", frozenset({"omnivore"})
    return None


def _state(rest: str) -> tuple[str, frozenset[str]] | None:
    """The single-valued relation a state after "am"/"is" names: an age, a job, a diet."""
    if found := _AGE.match(_VALUE_END.sub("", rest)):
        return "age", frozenset({found["value"]})
    if found := _JOB_TITLE.match(_AS_ROLE_END.sub("", rest)):
        return "work as", _words(found["value"])
    if found := _DIET.match(rest):
        return "diet", frozenset({found["value"].lower()})
    return None


def _ends(rest: str) -> tuple[bool, str]:
    """Whether the predicate says the relation ended, and the predicate without that."""
    for _ in range(2):  # "I have stopped …", "I am no longer …", "I have now stopped …"
        if found := _ENDED.match(rest):
            return True, found["rest"]
        if (found := _BE.match(rest)) and (ended := _ENDED.match(found["rest"])):
            return True, f"am {ended['rest']}"
        rest = _HELPERS.sub("", rest)
    return False, rest


def _claims_of_predicate(subject: str, rest: str) -> list[Claim]:
    ended, rest = _ends(_AGAIN.sub("", rest))
    rest = _HELPERS.sub("", rest)
    if not rest:
        return []
    claims = []
    if (be := _BE.match(rest)) is not None:
        rest = be["rest"]
        if (found := _PARTNER_OF.match(rest)) and found["value"][0].isupper():
            claims.append(Claim(subject, "partner", frozenset({found["value"].lower()}), ended))
        if state := _state(rest):
            claims.append(Claim(subject, state[0], state[1], ended))
    if slot := _slot(rest):
        claims.append(Claim(subject, slot[0], slot[1], ended))
    if found := _WORK_AT.match(rest):
        claims.append(Claim(subject, "work at", _value(found["value"]), ended))
    if claims:
        return list(dict.fromkeys(c for c in claims if c.value))  # a state read twice, once
    verb, _, obj = rest.partition(" ")
    # After "am", only a verb's -ing form ("learning the violin") is an action.
    if not verb.isalpha() or not verb.islower() or (be is not None and not verb.endswith("ing")):
        return []
    if verb in ("a", "an", "the", "not", "no", "to", "in") or _past(verb):
        return []  # an event ("we talked", "I haven't got the chance"), not a standing fact
    return [Claim(subject, f"do {_lemma(verb)}", _value(obj), ended)]


def _claims_of_clause(clause: str) -> list[Claim]:
    if found := _PARTNER_IS.match(clause):
        return [Claim("i", "partner", frozenset({found["value"].lower()}))]
    if found := _JOB_SUBJECT.match(clause):
        return [Claim("i", "work as", _value(_AS_ROLE_END.sub("", found["value"])))]
    found = _SUBJECT.match(clause)
    if found is None:
        return []
    if found["me"]:
        subject = "i"
    elif found["my"]:
        subject = found["my"].lower().replace("our ", "my ")
    else:
        name = found["name"]
        if not name[0].isupper() or name.lower() in _STOPWORDS or name.lower() == "you":
            return []
        subject = name.lower()
    return _claims_of_predicate(subject, found["rest"])


@functools.lru_cache(maxsize=8192)
def claims_of(content: str) -> tuple[Claim, ...]:
    """Every claim the memory's clauses make, in their order (none: it states nothing of these
    shapes). A clause's first word stays as written: a capital tells a person's name. Cached
    by content: a user's memories come back search after search."""
    claims: list[Claim] = []
    for clause in _CLAUSE_END.split(_long_form(content)):
        clause = _OPENER.sub("", clause.strip())
        if clause:
            claims.extend(_claims_of_clause(clause))
    return tuple(claims)


def _same_word(a: str, b: str) -> bool:
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def _within(small: frozenset[str], large: frozenset[str]) -> bool:
    return all(any(_same_word(s, w) for w in large) for s in small)


def _same_relation(a: Claim, b: Claim) -> bool:
    if a.relation == b.relation:
        return True
    # "do learn" and "do learnt": verbs compared by their stems.
    return (
        a.relation.startswith("do ")
        and b.relation.startswith("do ")
        and _same_word(a.relation[3:], b.relation[3:])
    )


def contradicts(a: Claim, b: Claim) -> bool:
    """Whether the two claims (of one subject) cannot both hold: one value of a single-valued
    relation against another, or a relation against its own end. Values are compared by
    their content words: "a houseboat in Amsterdam" does not contradict "Amsterdam"."""
    if not _same_relation(a, b):
        return False
    if a.ended != b.ended:
        held, ended = (b, a) if a.ended else (a, b)
        return (
            not ended.value or _within(ended.value, held.value) or _within(held.value, ended.value)
        )
    if a.ended or not a.single_valued:
        return False
    if not a.value or not b.value:
        return False
    return not _within(a.value, b.value) and not _within(b.value, a.value)
