"""Fact patterns by language: English (the reference's), Dutch and German.

Each pattern names the fact's subject `object`; the stored content is the whole matched
clause, so that "I don't like Python" is remembered as a dislike and "I never push to main"
keeps its "never". Keys are built from the subject, as the reference builds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The reference's capture: anything up to a period, comma or line end.
OBJECT = r"(?P<object>[^.,\n]+)"
# The same, ending before a closing word of the clause ("Ich werde X verwenden").
OBJECT_BEFORE = r"(?P<object>[^.,\n]+?)"
# The verb of a habit ("Ik commit altijd X"): part of the subject, unless it is a light verb.
VERB = r"(?P<verb>\w+)"

# A person's name: up to four words, ending before "and"/"en"/"und" and the like, so that
# "My name is Ana and I prefer Go" names Ana.
NAME = (
    r"(?P<object>[^\W\d_][\w'-]*"
    r"(?:\s+(?!(?:and|but|or|en|maar|of|und|aber|oder|i|ik|ich)\b)[^\W\d_][\w'-]*){0,3})"
)

CATEGORY_TYPES = {
    "preference": "factual",
    "decision": "episodic",
    "pattern": "factual",
    "profile": "factual",
}
CATEGORIES = tuple(CATEGORY_TYPES)


@dataclass(frozen=True)
class Pattern:
    language: str
    category: str
    regex: re.Pattern[str]
    # Light verbs left out of the subject ("doe" in "ik doe altijd X").
    drop_verbs: frozenset[str] = frozenset()
    # What the key names when it is not the object: "name" for "my name is X", so that a
    # new name replaces the old one.
    key_subject: str | None = None

    def subject(self, match: re.Match[str]) -> str:
        """What the fact is about: the object, after the verb of a habit when it has one."""
        verb = match.groupdict().get("verb")
        if verb and verb.casefold() not in self.drop_verbs:
            return f"{verb} {match['object']}"
        return match["object"]


def _pack(language: str, flags: int, table: dict[str, list[str]], **options) -> list[Pattern]:
    return [
        Pattern(language, category, re.compile(source, flags), **options)
        for category, sources in table.items()
        for source in sources
    ]


# JavaScript's \b is ASCII-only; re.ASCII keeps the English pack's matches identical to the
# reference's. "I will use" is a fix: the reference's `I'?(?:ll|will)` never matched it.
ENGLISH = _pack(
    "en",
    re.IGNORECASE | re.ASCII,
    {
        "preference": [
            rf"\bI\s+(?:really\s+)?prefer\s+{OBJECT}",
            rf"\bI\s+(?:really\s+)?like\s+{OBJECT}",
            rf"\bmy\s+(?:favorite|favourite)\s+(?:is|are)\s+{OBJECT}",
            rf"\bI\s+(?:don'?t|do\s+not)\s+like\s+{OBJECT}",
            rf"\bI\s+(?:hate|dislike|avoid)\s+{OBJECT}",
            rf"\bI\s+enjoy\s+{OBJECT}",
            rf"\bI\s+love\s+{OBJECT}",
        ],
        "decision": [
            rf"\bI(?:'ll|\s+will)\s+use\s+{OBJECT}",
            rf"\bI\s+chose\s+{OBJECT}",
            rf"\bI\s+(?:have\s+)?decided\s+(?:to\s+)?{OBJECT}",
            rf"\bI'?m\s+going\s+(?:to\s+)?(?:use|with|adopt)\s+{OBJECT}",
            rf"\bI\s+selected\s+{OBJECT}",
            rf"\bI\s+picked\s+{OBJECT}",
            rf"\bI\s+went\s+with\s+{OBJECT}",
        ],
        "pattern": [
            rf"\bI\s+usually\s+{OBJECT}",
            rf"\bI\s+always\s+{OBJECT}",
            rf"\bI\s+never\s+{OBJECT}",
            rf"\bI\s+typically\s+{OBJECT}",
            rf"\bI\s+tend\s+to\s+{OBJECT}",
            rf"\bI\s+(?:often|frequently|regularly)\s+{OBJECT}",
        ],
    },
)

# The Dutch seed's table: "Ik geef de voorkeur aan X", "Ik vind X leuk", "Ik haat X";
# "Ik gebruik X", "Ik heb besloten om X", "Ik koos voor X"; "Ik doe meestal/altijd/nooit X".
DUTCH = _pack(
    "nl",
    re.IGNORECASE,
    {
        "preference": [
            rf"\bik\s+geef\s+(?:echt\s+)?de\s+voorkeur\s+aan\s+{OBJECT}",
            rf"\bik\s+vind\s+{OBJECT_BEFORE}\s+(?:niet\s+|erg\s+|heel\s+)?leuk\b",
            rf"\bik\s+(?:haat|verafschuw|vermijd)\s+{OBJECT}",
            rf"\bik\s+heb\s+een\s+hekel\s+aan\s+{OBJECT}",
            rf"\bik\s+(?:hou|houd)\s+(?:niet\s+)?van\s+{OBJECT}",
            rf"\bik\s+heb\s+liever\s+{OBJECT}",
            rf"\bmijn\s+favoriete\s+\w+\s+(?:is|zijn)\s+{OBJECT}",
        ],
        "decision": [
            rf"\bik\s+gebruik\s+{OBJECT}",
            rf"\bik\s+ga\s+{OBJECT_BEFORE}\s+gebruiken\b",
            rf"\bik\s+heb\s+besloten\s+(?:om\s+)?{OBJECT}",
            rf"\bik\s+(?:koos|kies|kiezen)\s+(?:voor\s+)?{OBJECT}",
            rf"\bik\s+heb\s+gekozen\s+voor\s+{OBJECT}",
            rf"\bik\s+heb\s+voor\s+{OBJECT_BEFORE}\s+gekozen\b",
        ],
        "pattern": [
            rf"\bik\s+{VERB}\s+(?:meestal|altijd|nooit|gewoonlijk|vaak|regelmatig)\s+{OBJECT}",
        ],
    },
    drop_verbs=frozenset({"doe"}),
)

# The German seed's table: "Ich bevorzuge X", "Ich mag X", "Ich hasse X";
# "Ich werde X verwenden", "Ich habe mich für X entschieden";
# "Ich mache normalerweise/immer/nie X".
GERMAN = _pack(
    "de",
    re.IGNORECASE,
    {
        "preference": [
            rf"\bich\s+bevorzuge\s+{OBJECT}",
            rf"\bich\s+mag\s+(?:keine?n?\s+)?{OBJECT_BEFORE}(?:\s+nicht)?(?=\s*(?:[.,\n]|$))",
            rf"\bich\s+(?:hasse|verabscheue|meide|vermeide)\s+{OBJECT}",
            rf"\bich\s+liebe\s+{OBJECT}",
            rf"\bmeine?\s+lieblings\w+\s+(?:ist|sind)\s+{OBJECT}",
        ],
        "decision": [
            rf"\bich\s+werde\s+{OBJECT_BEFORE}\s+(?:verwenden|benutzen|nutzen|einsetzen|nehmen)\b",
            rf"\bich\s+habe\s+mich\s+für\s+{OBJECT_BEFORE}\s+entschieden\b",
            rf"\bich\s+habe\s+(?:beschlossen|entschieden)\s*,?\s+{OBJECT}",
            rf"\bich\s+(?:wähle|wählte|nehme|verwende|benutze|nutze)\s+{OBJECT}",
        ],
        "pattern": [
            rf"\bich\s+{VERB}\s+(?:normalerweise|immer|nie|niemals|meistens|oft|gewöhnlich|"
            rf"regelmäßig)\s+{OBJECT}",
        ],
    },
    drop_verbs=frozenset({"mache"}),
)

# "My name is X" in each language: Unicode-aware even in English, as names are not ASCII.
PROFILE = [
    *_pack("en", re.IGNORECASE, {"profile": [rf"\bmy\s+name\s+is\s+{NAME}"]}, key_subject="name"),
    *_pack(
        "nl",
        re.IGNORECASE,
        {"profile": [rf"\bik\s+heet\s+{NAME}", rf"\bmijn\s+naam\s+is\s+{NAME}"]},
        key_subject="name",
    ),
    *_pack(
        "de",
        re.IGNORECASE,
        {"profile": [rf"\bich\s+hei(?:ß|ss)e\s+{NAME}", rf"\bmein\s+name\s+ist\s+{NAME}"]},
        key_subject="name",
    ),
]

PATTERNS: tuple[Pattern, ...] = (*ENGLISH, *DUTCH, *GERMAN, *PROFILE)
