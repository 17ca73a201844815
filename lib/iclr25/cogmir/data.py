"""Our own question banks, identities and narratives for chapter 03 (CogMir).

Written for this book (the official CogMir repository has no licence, so none of its data is
used). Everything is built in code from small fact tables, deterministic given a seed:

- :func:`known_bank` -- two-option questions with one right answer any reader knows
  (capitals, colours, animals, opposites, arithmetic, everyday facts). Pretest them with
  :func:`iclr25.cogmir.protocols.pretest` and keep those the model answers right in both
  option orders without a cue.
- :func:`unknown_bank` -- two-option questions about future events nobody can know (weather,
  traffic, scores on dates after 2030); neither option is right.
- :data:`IDENTITIES` -- agent profiles with a role category (superior, peer, stranger, friend).
- :data:`NARRATIVES` -- 30 short invented stories for the rumour chain.
- price items (confirmation), chance games (gambler's fallacy), competitions (Ben Franklin).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MCQ", "known_bank", "chance_games", "unknown_bank", "Identity", "IDENTITIES", "identities",
           "NARRATIVES", "PRICE_ITEMS", "CHANCE_GAMES", "COMPETITIONS"]


@dataclass(frozen=True)
class MCQ:
    """A two-option question (chapter 03). ``options[0]`` is the right answer of a known
    question; an unknown question has no right answer (``known=False``)."""

    id: str
    question: str
    options: tuple[str, str]
    known: bool
    topic: str = ""


_CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Germany", "Berlin"),
             ("Spain", "Madrid"), ("England", "London"), ("Russia", "Moscow"),
             ("China", "Beijing"), ("Egypt", "Cairo"), ("Greece", "Athens"),
             ("Canada", "Ottawa"), ("Australia", "Canberra"), ("Portugal", "Lisbon"),
             ("Ireland", "Dublin"), ("Norway", "Oslo"), ("Austria", "Vienna")]
_COLOURS = [("grass", "green", "purple"), ("the sky on a clear day", "blue", "brown"),
            ("fresh snow", "white", "black"), ("a ripe banana", "yellow", "blue"),
            ("coal", "black", "white"), ("blood", "red", "green"), ("milk", "white", "red"),
            ("a ripe lemon", "yellow", "black"), ("a ripe strawberry", "red", "blue"),
            ("a carrot", "orange", "purple"), ("the sun in a child's drawing", "yellow", "grey"),
            ("a polar bear's fur", "white", "green"), ("a fire truck", "red", "blue"),
            ("a crow", "black", "pink")]
_ANIMALS = [("How many legs does a dog have?", "four", "ten"),
            ("How many legs does a spider have?", "eight", "two"),
            ("How many legs does a chicken have?", "two", "six"),
            ("Which animal barks?", "dog", "fish"),
            ("Which animal says moo?", "cow", "snake"),
            ("Which animal has a long trunk?", "elephant", "rabbit"),
            ("Which animal lives in the sea?", "shark", "horse"),
            ("Which animal can fly?", "eagle", "pig"),
            ("Which animal has black and white stripes?", "zebra", "frog"),
            ("Which animal makes honey?", "bee", "cat"),
            ("Which animal is bigger?", "whale", "mouse"),
            ("Which animal hops and carries its baby in a pouch?", "kangaroo", "goat")]
_OPPOSITES = [("hot", "cold", "tall"), ("up", "down", "blue"), ("day", "night", "chair"),
              ("big", "small", "loud"), ("fast", "slow", "green"), ("wet", "dry", "round"),
              ("open", "closed", "sweet"), ("happy", "sad", "heavy"), ("full", "empty", "early"),
              ("light", "dark", "soft"), ("young", "old", "wide"), ("left", "right", "thin")]
_FACTS = [("How many days are in a week?", "seven", "twelve"),
          ("How many months are in a year?", "twelve", "five"),
          ("How many hours are in a day?", "twenty-four", "nine"),
          ("Which season is usually the coldest?", "winter", "summer"),
          ("What is frozen water called?", "ice", "sand"),
          ("Which planet do we live on?", "Earth", "Mars"),
          ("Where does the sun rise?", "east", "west"),
          ("What do cows give us to drink?", "milk", "petrol"),
          ("What do you use to write on paper?", "pen", "spoon"),
          ("What falls from clouds when it rains?", "water", "sand"),
          ("What do plants need to grow?", "sunlight", "darkness"),
          ("What shape is a ball?", "round", "square"),
          ("Which is heavier?", "car", "feather"),
          ("What do people wear on their feet?", "shoes", "hats"),
          ("What is the first letter of the English alphabet?", "A", "Z"),
          ("Which meal is eaten in the morning?", "breakfast", "dinner")]
_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                 "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                 "seventeen", "eighteen", "nineteen", "twenty"]


def known_bank() -> list[MCQ]:
    """Our known two-option questions (chapter 03): 94 facts, plus (issue 54) every other sum
    of two numbers 1-10 up to twenty, twenty more capitals, twenty comparisons of two numbers
    and the numbers right after / before one to sixteen; ``options[0]`` right."""
    out: list[MCQ] = []
    caps = [c for _, c in _CAPITALS]
    for i, (country, capital) in enumerate(_CAPITALS):
        wrong = caps[(i + 5) % len(caps)]
        out.append(MCQ(f"capital-{i}", f"What is the capital of {country}?", (capital, wrong),
                       True, "capitals"))
    for i, (thing, right, wrong) in enumerate(_COLOURS):
        out.append(MCQ(f"colour-{i}", f"What colour is {thing}?", (right, wrong), True,
                       "colours"))
    for i, (q, right, wrong) in enumerate(_ANIMALS):
        out.append(MCQ(f"animal-{i}", q, (right, wrong), True, "animals"))
    for i, (word, right, wrong) in enumerate(_OPPOSITES):
        out.append(MCQ(f"opposite-{i}", f"What is the opposite of {word}?", (right, wrong),
                       True, "opposites"))
    for i, (q, right, wrong) in enumerate(_FACTS):
        out.append(MCQ(f"fact-{i}", q, (right, wrong), True, "facts"))
    sums = [(1, 1), (2, 2), (2, 3), (3, 4), (5, 5), (1, 2), (4, 4), (3, 3), (6, 2), (7, 1),
            (2, 5), (4, 1), (5, 3), (6, 4), (8, 2), (9, 1), (3, 6), (7, 2), (5, 4), (10, 10),
            (6, 6), (8, 1), (2, 7), (4, 5)]
    for i, (a, b) in enumerate(sums):
        right = a + b
        wrong = right + 7 if right + 7 <= 20 else right - 7
        out.append(MCQ(f"sum-{i}", f"What is {a} plus {b}?",
                       (_NUMBER_WORDS[right], _NUMBER_WORDS[wrong]), True, "arithmetic"))
    # issue 54: the bank extended so that at least 100 questions survive SmolLM2's pretest
    seen = set(sums)
    extra = [(a, b) for a in range(1, 11) for b in range(a, 11) if (a, b) not in seen
             and (b, a) not in seen and a + b <= 20]
    for i, (a, b) in enumerate(extra):
        right = a + b
        wrong = right + 7 if right + 7 <= 20 else right - 7
        out.append(MCQ(f"sum-x{i}", f"What is {a} plus {b}?",
                       (_NUMBER_WORDS[right], _NUMBER_WORDS[wrong]), True, "arithmetic"))
    more = [("the Netherlands", "Amsterdam"), ("Sweden", "Stockholm"), ("Finland", "Helsinki"),
            ("Denmark", "Copenhagen"), ("Poland", "Warsaw"), ("Hungary", "Budapest"),
            ("Belgium", "Brussels"), ("the Czech Republic", "Prague"), ("Thailand", "Bangkok"),
            ("South Korea", "Seoul"), ("Argentina", "Buenos Aires"), ("Peru", "Lima"),
            ("Kenya", "Nairobi"), ("Turkey", "Ankara"), ("Cuba", "Havana"), ("Iran", "Tehran"),
            ("Iraq", "Baghdad"), ("Chile", "Santiago"), ("Colombia", "Bogota"),
            ("Scotland", "Edinburgh")]
    caps2 = [c for _, c in more]
    for i, (country, capital) in enumerate(more):
        out.append(MCQ(f"capital-x{i}", f"What is the capital of {country}?",
                       (capital, caps2[(i + 7) % len(caps2)]), True, "capitals"))
    bigger = [(20, 1), (19, 8), (18, 1), (17, 9), (16, 5), (15, 3), (14, 3), (13, 5), (12, 1),
              (11, 2), (10, 5), (9, 3), (20, 5), (19, 2), (18, 7), (17, 2), (16, 4), (15, 1),
              (14, 7), (13, 2)]
    for i, (big, small) in enumerate(bigger):
        out.append(MCQ(f"bigger-{i}", "Which of these two numbers is bigger?",
                       (_NUMBER_WORDS[big], _NUMBER_WORDS[small]), True, "comparison"))
    for n in range(1, 16):
        out.append(MCQ(f"after-{n}", f"Which number comes right after {_NUMBER_WORDS[n]}?",
                       (_NUMBER_WORDS[n + 1], _NUMBER_WORDS[(n + 9) % 21]), True, "counting"))
    for n in range(2, 17):
        out.append(MCQ(f"before-{n}", f"Which number comes right before {_NUMBER_WORDS[n]}?",
                       (_NUMBER_WORDS[n - 1], _NUMBER_WORDS[(n + 8) % 21]), True, "counting"))
    return out


_CITIES = ["Oslo", "Lima", "Perth", "Nairobi", "Osaka", "Porto", "Quebec", "Tbilisi",
           "Hanoi", "Cordoba", "Tampere", "Leeds", "Accra", "Bergen", "Dresden", "Recife"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"]
_UNKNOWN_TEMPLATES = [
    ("weather", "What will the weather be like in {city} on {date}?", ("rainy", "dry")),
    ("temperature", "What will the noon temperature in {city} be on {date}?",
     ("above 15 degrees", "below 15 degrees")),
    ("car", "What colour will the first car to cross the main square of {city} on {date} be?",
     ("red", "white")),
    ("football", "Which team will score first in the {city} city league match on {date}?",
     ("home team", "away team")),
    ("museum", "How many people will visit the {city} city museum on {date}?",
     ("more than 2,000", "fewer than 2,000")),
    ("lottery", "What kind of number will be drawn first in the {city} lottery on {date}?",
     ("odd", "even")),
    ("bus", "How will the first bus to leave {city} station on {date} run?",
     ("early", "late")),
    ("market", "Which way will the price of apples at the {city} market move on {date}?",
     ("up", "down")),
]


def unknown_bank(n: int = 96, seed: int = 0) -> list[MCQ]:
    """``n`` questions about future events nobody can know (chapter 03): a topic template, a
    city and a date in 2031-2039, drawn without repeats from ``seed``."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = np.random.default_rng(seed)
    out, seen = [], set()
    limit = len(_UNKNOWN_TEMPLATES) * len(_CITIES) * 12
    if n > limit:
        raise ValueError(f"at most {limit} distinct unknown questions, asked for {n}")
    while len(out) < n:
        t = int(rng.integers(len(_UNKNOWN_TEMPLATES)))
        c = int(rng.integers(len(_CITIES)))
        if (t, c) in seen and len(seen) < len(_UNKNOWN_TEMPLATES) * len(_CITIES):
            continue
        seen.add((t, c))
        topic, template, options = _UNKNOWN_TEMPLATES[t]
        date = f"{int(rng.integers(1, 29))} {_MONTHS[int(rng.integers(12))]} " \
               f"{int(rng.integers(2031, 2040))}"
        q = template.format(city=_CITIES[c], date=date)
        if any(m.question == q for m in out):
            continue
        out.append(MCQ(f"unknown-{len(out)}", q, options, False, topic))
    return out


@dataclass(frozen=True)
class Identity:
    """An agent profile (chapter 03): how others introduce it, and its role category."""

    name: str
    occupation: str
    traits: str
    category: str   # "superior" | "peer" | "stranger" | "friend"

    def describe(self) -> str:
        return f"{self.name}, {self.occupation}"


IDENTITIES: tuple[Identity, ...] = (
    Identity("Professor Helen Marsh", "a senior professor who has studied this topic for thirty years", "careful, respected", "superior"),
    Identity("Dr. Samuel Okafor", "the chief scientist of a national research institute", "precise, confident", "superior"),
    Identity("Judge Clara Lindqvist", "a high court judge known for her sound judgement", "calm, authoritative", "superior"),
    Identity("Dr. Aiko Tanaka", "the head of the expert panel for this quiz", "meticulous, senior", "superior"),
    Identity("Ben", "another participant in the study, a student like you", "friendly", "peer"),
    Identity("Lina", "another participant in the study, an office worker", "quiet", "peer"),
    Identity("Ricky", "a stranger you met five minutes ago", "unknown to you", "stranger"),
    Identity("Tom", "a passer-by you have never seen before", "unknown to you", "stranger"),
    Identity("Hazel", "your best friend since childhood, whom you trust and admire", "warm, loyal", "friend"),
    Identity("Maya", "your closest friend, whose opinion you value highly", "kind, clever", "friend"),
)


def identities(category: str) -> list[Identity]:
    """The identities of one role category (chapter 03); an unknown category is an error
    naming the valid ones."""
    cats = sorted({i.category for i in IDENTITIES})
    if category not in cats:
        raise ValueError(f"unknown identity category {category!r}; valid: {', '.join(cats)}")
    return [i for i in IDENTITIES if i.category == category]


#: items to price (confirmation): (item, low price, high price) in dollars
PRICE_ITEMS: tuple[tuple[str, int, int], ...] = (
    ("a plastic water cup", 2, 40), ("a paper notebook", 3, 45), ("a wooden pencil", 1, 30),
    ("a bar of soap", 2, 35), ("a cotton T-shirt", 10, 120), ("a coffee mug", 5, 80),
    ("a toothbrush", 3, 50), ("a pair of socks", 5, 70), ("a loaf of bread", 3, 40),
    ("a kitchen spoon", 2, 35), ("a tennis ball", 3, 45), ("a desk lamp", 20, 250),
    ("a baseball cap", 12, 150), ("a USB cable", 6, 90), ("an umbrella", 15, 200),
    ("a box of tissues", 2, 30), ("a candle", 5, 75), ("a pack of batteries", 6, 85),
    ("a plant pot", 8, 110), ("a paperback novel", 9, 120), ("a jar of honey", 7, 95),
    ("a bicycle bell", 8, 100), ("a hand towel", 6, 80), ("a wall calendar", 10, 130),
)

#: chance games (gambler's fallacy): (setting, outcome 1, outcome 2)
CHANCE_GAMES: tuple[tuple[str, str, str], ...] = (
    ("A fair coin is tossed.", "heads", "tails"),
    ("A fair six-sided die is rolled and we note whether the number is odd or even.", "odd", "even"),
    ("A card is drawn from a well-shuffled full deck and put back.", "red", "black"),
    ("A fair spinner with two equal halves is spun.", "blue", "yellow"),
    ("A ball is drawn from a bag with equally many white and green balls, then put back.", "white", "green"),
    ("A fair coin is flipped by a machine.", "heads", "tails"),
    ("A roulette-style wheel with only red and black slots, equally many of each, is spun.", "red", "black"),
    ("A random number generator prints 0 or 1 with equal chance.", "zero", "one"),
    ("A fair two-sided token is thrown.", "sun", "moon"),
    ("A light turns on in one of two equally likely colours.", "green", "orange"),
    ("A referee tosses a fair coin before each match.", "heads", "tails"),
    ("A fair die decides whether the answer is high (4 to 6) or low (1 to 3).", "high", "low"),
)

#: competitions (Ben Franklin): what two people compete for
COMPETITIONS: tuple[str, ...] = (
    "the last seat on a training course", "a single promotion at work", "one research grant",
    "the top prize in a baking contest", "the only parking space near the office",
    "one place in a chess final", "the lead role in a school play", "one scholarship",
    "the best desk by the window", "a single ticket to a sold-out concert",
    "the last copy of a rare book", "first place in a science fair",
)

#: names of competitors (Ben Franklin)
COMPETITORS: tuple[str, ...] = ("Alex", "Priya", "Jonas", "Sofia", "Kenji", "Amara", "Lucas",
                                "Nadia")

NARRATIVES: tuple[str, ...] = (
    "A baker in a small town found a lost kitten in her flour sack one morning. She named it Biscuit and it now sleeps by the warm oven every day.",
    "Two brothers built a wooden raft over one summer. On its first trip down the river it sank near the bridge, and they swam back laughing.",
    "An old lighthouse keeper kept a diary for forty years. When he retired, he gave it to the village library, where children read it every week.",
    "A girl planted a lemon seed in a yoghurt pot. Six years later the tree gave so many lemons that she sold lemonade to the whole street.",
    "A bus driver noticed a wallet on an empty seat. He drove to the address on a card inside and returned it to a surprised nurse.",
    "During a storm the power went out at the school concert. The choir kept singing in the dark, and parents lit the hall with their phones.",
    "A fisherman caught a bottle with a letter from a boy in another country. They wrote to each other for years and finally met last spring.",
    "A café owner started a shelf where people leave books and take others. The shelf grew so full that he added a second one by the door.",
    "A runner twisted her ankle a mile before the finish. Another runner stopped, helped her walk, and they crossed the line together.",
    "A farmer's goat escaped and ate the mayor's prize roses. The mayor laughed, took a photo, and hung it in the town hall.",
    "A boy taught his grandmother to send text messages. Now she sends him a joke every morning before he goes to school.",
    "A train stopped for an hour because a family of ducks sat on the tracks. The driver waited until they walked away into the reeds.",
    "A painter lost her brushes on a hike. She painted the view with sticks and leaves, and that picture became her most famous work.",
    "A small library ran out of money to buy books. The neighbours held a street party and raised enough for three hundred new ones.",
    "A cook mixed up salt and sugar in a big pot of soup. The guests loved the strange taste and asked for the recipe.",
    "Two neighbours argued for years about a tree on the fence line. When it fell in a storm, they built a bench from its wood together.",
    "A student missed the last train home after an exam. A kind stranger shared a taxi with her and refused to take any money.",
    "A zoo keeper noticed a parrot copying the sound of the ice cream van. Visitors now gather every afternoon to hear it sing.",
    "A pilot saw a heart drawn in the snow on a field below. She tipped her wings, and the couple who drew it waved back.",
    "A gardener found an old coin while digging. A museum said it was three hundred years old and put it on display with his name.",
    "A dog walked into a hardware shop every day at noon. The owner learned it belonged to a retired carpenter who used to work there.",
    "A choir teacher lost her voice before the big show. Her students led the whole concert themselves and dedicated it to her.",
    "A man knitted a scarf so long that it wrapped around his house. He later cut it into pieces and gave them to a shelter.",
    "A little girl wrote to the council asking for a bench by the pond. A month later a bench arrived with her name carved on it.",
    "A tailor repaired a torn wedding dress an hour before the ceremony. The bride invited him to the party as a guest of honour.",
    "A delivery driver found a tortoise crossing a busy road. He carried it to a park and now checks on it every Friday.",
    "An astronomer in a village saw a new comet from her garden. The comet was named after her and the village held a festival.",
    "A school's old piano was going to be thrown away. A music teacher fixed it over the holidays, and students now play it at lunch.",
    "A hiker lost his map in the fog and followed a sheepdog down the hill. The dog led him straight to the farm where it lived.",
    "A mechanic rebuilt a rusty car that had sat in a barn for thirty years. He drove its first owner, now ninety, around the town.",
)


_DEVICES = (("A fair coin is tossed", "heads", "tails"),
            ("A fair six-sided die is rolled and we note whether the number is odd or even",
             "odd", "even"),
            ("A card is drawn from a well-shuffled full deck, noted and put back", "red", "black"),
            ("A fair spinner with two equal halves is spun", "blue", "yellow"),
            ("A ball is drawn from a bag with equally many white and green balls, then put back",
             "white", "green"),
            ("A roulette-style wheel with equally many red and black slots is spun", "red",
             "black"),
            ("A random number generator prints 0 or 1 with equal chance", "zero", "one"),
            ("A fair two-sided token is thrown", "sun", "moon"),
            ("A light turns on in one of two equally likely colours", "green", "orange"),
            ("A fair die decides whether the result is high (4 to 6) or low (1 to 3)", "high",
             "low"))
_PLACES = ("at a school fair", "in a casino", "in a classroom experiment",
           "at a family game night", "on a television show")


def chance_games(n: int = 50) -> tuple[tuple[str, str, str], ...]:
    """``n`` fair two-outcome games (chapter 03, gambler's fallacy; issue 54: the list extended
    to the registered 50): the 12 of :data:`CHANCE_GAMES`, then ten devices at five places."""
    games = list(CHANCE_GAMES) + [(f"{d} {p}.", a, b) for p in _PLACES for d, a, b in _DEVICES]
    if not isinstance(n, int) or not 1 <= n <= len(games):
        raise ValueError(f"n must be an integer in [1, {len(games)}], got {n!r}")
    return tuple(games[:n])
