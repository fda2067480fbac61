"""The fictional world behind the SearchQA env: towns and people with made-up names, one document each, and
questions about them with reference answers.

Everything is generated from a fixed seed, so the corpus and the question list are the same on every machine
and ship with the code (no download). The names are invented, so a model cannot know an answer from
pretraining: it has to search. Questions are single-hop ("In which year was the town of Marsk founded?") or
two-hop ("In which year was the home town of Odra Pellin founded?": find the person, then the town).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

#: Seed of the shipped world (changing it changes every question and answer).
WORLD_SEED = 20260
NUM_TOWNS = 120
NUM_PEOPLE = 240
#: Share of the questions held out as the validation split (the last ones in the fixed order).
VALIDATION_FRACTION = 0.2

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "st", "tr", "th"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ei"]
_CODAS = ["", "", "n", "r", "s", "l", "k", "sk", "nd", "rt"]
_INDUSTRIES = ["salt mining", "glass blowing", "wool weaving", "clock making", "cheese making", "boat building",
               "copper smelting", "paper milling", "bell casting", "rope making", "honey farming", "silk dyeing"]
_RIVERS_OR_COASTS = ["on a river", "on the coast", "in the hills", "in a valley", "on a lake", "in the forest"]
_JOBS = ["a baker", "a surveyor", "a poet", "a blacksmith", "a teacher", "a physician", "a cartographer",
         "a brewer", "a judge", "an astronomer", "a carpenter", "a merchant"]


@dataclass(frozen=True)
class Document:
    """One page of the corpus."""

    title: str
    text: str


@dataclass(frozen=True)
class Question:
    """One question, its reference answer, and the searches an oracle makes (in order)."""

    question: str
    answer: str
    searches: tuple[str, ...]


@dataclass(frozen=True)
class World:
    documents: tuple[Document, ...]
    questions: tuple[Question, ...]


def _name(rng: random.Random, syllables: int) -> str:
    word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)) + rng.choice(_CODAS)
    return word.capitalize()


def _unique_names(rng: random.Random, n: int, make) -> list[str]:
    seen: set[str] = set()
    out = []
    while len(out) < n:
        name = make(rng)
        if name.lower() not in seen:
            seen.add(name.lower())
            out.append(name)
    return out


@lru_cache(maxsize=2)
def build_world(seed: int = WORLD_SEED) -> World:
    """The corpus and the questions of the world made from ``seed`` (deterministic)."""
    rng = random.Random(seed)
    towns = _unique_names(rng, NUM_TOWNS, lambda r: _name(r, 2))
    town_info = {t: {"founded": rng.randint(1200, 1950), "industry": rng.choice(_INDUSTRIES),
                     "where": rng.choice(_RIVERS_OR_COASTS), "population": rng.randint(2, 900) * 100}
                 for t in towns}
    firsts = _unique_names(rng, NUM_PEOPLE, lambda r: _name(r, 2))
    people = [f"{first} {_name(rng, 2)}" for first in firsts]
    person_info = {p: {"town": rng.choice(towns), "job": rng.choice(_JOBS), "born": rng.randint(1700, 1990)}
                   for p in people}
    mayors = {t: p for p, t in ((p, person_info[p]["town"]) for p in people)}  # the last person named per town

    docs = []
    for t in towns:
        i = town_info[t]
        mayor = f" Its mayor is {mayors[t]}." if t in mayors else ""
        docs.append(Document(t, f"{t} is a town {i['where']} with about {i['population']} inhabitants. It was "
                                f"founded in {i['founded']} and is known for {i['industry']}.{mayor}"))
    for p in people:
        i = person_info[p]
        docs.append(Document(p, f"{p} is {i['job']} born in {i['born']} in the town of {i['town']}."))

    questions = []
    for t in towns:
        i = town_info[t]
        questions.append(Question(f"In which year was the town of {t} founded?", str(i["founded"]), (t,)))
        questions.append(Question(f"What is the town of {t} known for?", i["industry"], (t,)))
    for p in people:
        i = person_info[p]
        questions.append(Question(f"In which town was {p} born?", i["town"], (p,)))
        questions.append(Question(f"In which year was {p} born?", str(i["born"]), (p,)))
        home = town_info[i["town"]]
        questions.append(Question(f"In which year was the home town of {p} founded?", str(home["founded"]),
                                  (p, i["town"])))
    rng.shuffle(questions)
    return World(tuple(docs), tuple(questions))


def split_questions(world: World, split: str) -> tuple[Question, ...]:
    """The fixed ``train`` or ``validation`` questions of ``world``."""
    cut = int(round(len(world.questions) * (1 - VALIDATION_FRACTION)))
    if split == "train":
        return world.questions[:cut]
    if split == "validation":
        return world.questions[cut:]
    raise ValueError(f"split={split!r} is invalid: use 'train' or 'validation'")
