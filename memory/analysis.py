"""Text analysis: terms, hashed features and TF-IDF weights, the same for chunks and queries.

Terms (docs/memory.md, Analysis, has the examples):

- words are lower-cased and Snowball-stemmed (PyStemmer), so "deploys", "deployed" and
  "deploying" are one term;
- identifiers (snake_case, CamelCase, kebab-case) are kept whole *and* split into their stemmed
  parts, so `close_day` matches "close day" and the exact identifier still ranks first;
- issue and PR references (`#123`, `owner/name#123`) and versions (`v0.9.0`, `7.2`) are single
  terms (`#123`, `v0.9.0`), never cut at the dots;
- a stop list (English function words plus the words of questions and requests: did, does,
  say, tell, happen, remind...) is dropped before stemming.

Each term is hashed with murmurhash3 (seed 0, `abs` modulo 2^20, as scikit-learn's
`HashingVectorizer` does), once per distinct raw token (cached with its terms). Weights are
SMART `lnc.ltc` (docs/memory.md says why):

- a chunk's weight is `1 + ln(tf)`, L2-normalised over the chunk: no corpus statistic, so a
  stored chunk never changes when others arrive and rebuild equals incremental exactly;
- a query's weight is `(1 + ln(tf)) * idf`, idf computed at query time from the kept
  document frequencies.

Speed: analysing and hashing a raw token (stemming, splitting) happens once per distinct
token in a bounded cache; a chunk costs one `bytes.translate` and `split` plus a dictionary
look-up per token, and counting is one `np.unique`, which keeps adding 1,000 chunks well
inside its budget.
"""

from __future__ import annotations

import importlib.util
import re
import string
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import mmh3
import numpy as np
import Stemmer
from numpy.typing import NDArray

N_FEATURES = 2**20
# Bump when terms, hashing or weights change: an index built another way is rebuilt
# (memory.Memory.sync does it by itself, with progress; `steelframe memory reindex` too).
ANALYSIS_VERSION = 3
CACHE_LIMIT = 200_000  # distinct raw tokens remembered (cleared when full)

# scikit-learn's English list, less the words that name things in software (an "empty"
# queue, the "system" prompt, a function "call", a "full" rebuild...) and counts ("two
# reminder emails", "three retries").
_KEEP = frozenset(
    "system empty call show move found find fire full back front top bottom name part detail"
    " describe side fill interest bill computer con de cry mill amount thick thin sincere"
    " first last next third well two three four five six eight nine ten eleven twelve"
    " fifteen twenty forty fifty sixty hundred".split()
)
# The words of questions and requests: they say what is asked, not what it is about, and
# dilute short questions ("what did we say about the flaky test?").
_QUESTION = frozenset(
    "did does doing done say said says saying tell told telling know knew known think thought"
    " try tried trying want wanted wants wonder wondering remind recall remember explain"
    " explained happen happened happens happening anything something thing things stuff"
    " way ways make made makes let lets like just really actually got gets getting going"
    " guess maybe please thanks thank okay ok hey hi hello yes yeah ago lately recently"
    " today yesterday exactly basically currently specifically anybody somebody someone"
    " didn doesn isn wasn aren weren hasn haven couldn wouldn shouldn don won ve ll".split()
)


def _english_stop_words() -> frozenset[str]:
    """scikit-learn's English stop-word list, the one memory's terms were always cut by, read
    from the one module that declares it without importing scikit-learn (its import pulls in
    scipy.stats: ~0.8 s of CPU in every process that analyses text). Should a release move
    that file, the list comes through scikit-learn's public import, slower but the same."""
    package = importlib.util.find_spec("sklearn")
    locations = package.submodule_search_locations if package else None
    if locations:
        path = f"{next(iter(locations))}/feature_extraction/_stop_words.py"
        spec = importlib.util.spec_from_file_location("_sklearn_stop_words", path)
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
                words = getattr(module, "ENGLISH_STOP_WORDS", None)
                if isinstance(words, frozenset):
                    return words
            except OSError:
                pass
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


STOP_WORDS = (_english_stop_words() - _KEEP) | _QUESTION

# A raw token is a run of word characters, '#', '.' and '-' (cut anywhere else): an ASCII
# fast path maps every other byte to a space with bytes.translate, then splits (C speed);
# each distinct run is then analysed once (Terms._run) and cached.
_RUN_BYTES = frozenset((string.ascii_letters + string.digits + "_#.-").encode())
_ASCII_TABLE = bytes(b if b in _RUN_BYTES else 0x20 for b in range(256))
_RUN = re.compile(r"[\w#.-]+")
_REF = re.compile(r"#\d+")
_VERSION = re.compile(r"[vV]?\d+(?:\.\d+)+")
_PIECES = re.compile(r"(#\d+)|[.#]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# An acronym's plural ("PDFs", "URLs", "IDs"): the acronym, not a CamelCase "PD" + "Fs".
_ACRONYM_PLURAL = re.compile(r"[A-Z]{2,}s")


@dataclass(frozen=True)
class DocTerms:
    """Term occurrences of a batch of documents, sorted by (doc, term); one row per pair."""

    doc: NDArray[np.int64]
    term: NDArray[np.int64]
    count: NDArray[np.int64]
    n_docs: int


class Terms:
    """Raw token -> its terms, computed once per distinct token (stemming is the cost)."""

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("english")
        self._stemmer.maxCacheSize = 0  # our own cache holds whole tokens; its own would thrash
        self._stem_lock = threading.Lock()  # one PyStemmer object is not thread-safe
        self._cache: dict[str, tuple[str, ...]] = {}
        self._features: dict[str, tuple[int, ...]] = {}  # the same, hashed

    def of(self, text: str) -> list[str]:
        return self.many([text])[0]

    def many(self, texts: Sequence[str]) -> list[list[str]]:
        """Terms of each text, in order."""
        runs = self._resolve(texts)
        try:
            lookup = self._cache.__getitem__
            return [list(chain.from_iterable(map(lookup, text_runs))) for text_runs in runs]
        except KeyError:  # another thread cleared the full cache meanwhile
            return [[t for raw in text_runs for t in self._uncached(raw)] for text_runs in runs]

    def features(self, texts: Sequence[str]) -> list[list[int]]:
        """Feature ids of each text's terms, in order (hashed once per distinct token).

        The same shape as `many` on purpose: both are the indexing hot loop, and a shared
        step taking the cache and the fallback as arguments cost a call per token."""
        runs = self._resolve(texts)
        try:
            lookup = self._features.__getitem__
            return [list(chain.from_iterable(map(lookup, text_runs))) for text_runs in runs]
        except KeyError:  # another thread cleared the full cache meanwhile
            return [
                [_feature(t) for raw in text_runs for t in self._uncached(raw)]
                for text_runs in runs
            ]

    def _uncached(self, raw: str) -> tuple[str, ...]:
        plain = raw.isalpha() and raw.islower() and raw.isascii()
        if plain:
            return self._stems([raw]) if _content(raw) else ()
        return self._run(raw)

    def _resolve(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text's raw tokens; tokens not seen before are analysed together, so the plain
        lower-case words among them (most of them) are stemmed in one call."""
        runs = [
            text.encode("ascii").translate(_ASCII_TABLE).decode("ascii").split()
            if text.isascii()
            else _RUN.findall(text)
            for text in texts
        ]
        cache = self._cache
        unique = set(chain.from_iterable(runs))
        missing = [raw for raw in unique if raw not in cache]
        if not missing:
            return runs
        if len(cache) + len(missing) > CACHE_LIMIT:
            cache.clear()
            self._features.clear()
            missing = list(unique)
        plain = [raw for raw in missing if raw.isalpha() and raw.islower() and raw.isascii()]
        found: dict[str, tuple[str, ...]] = {
            raw: (stem,) if _content(raw) else ()
            for raw, stem in zip(plain, self._stems(plain), strict=True)
        }
        for raw in set(missing).difference(plain):
            found[raw] = self._run(raw)
        self._features.update((raw, tuple(map(_feature, terms))) for raw, terms in found.items())
        cache.update(found)  # after the features: a reader of both never misses
        return runs

    def _run(self, raw: str) -> tuple[str, ...]:
        token = raw.strip(".-")
        if not token:
            return ()
        if _REF.fullmatch(token):
            return (token,)  # an issue or PR reference
        if _VERSION.fullmatch(token):
            return ("v" + token.lstrip("vV"),)  # v0.9.0 and 0.9.0 are one term
        if "#" in token or "." in token:  # file.py, owner/name#12 (the '/' is cut), e.g.
            pieces = [p for p in _PIECES.split(token) if p]
            return tuple(t for piece in pieces for t in self._run(piece))
        return self._word(token)

    def _word(self, raw: str) -> tuple[str, ...]:
        if _ACRONYM_PLURAL.fullmatch(raw):
            raw = raw[:-1]
        lower = raw.lower()
        pieces: list[str] = []
        for part in re.split(r"[_-]+", raw):
            if part.isascii() and not part.islower() and not part.isupper():
                pieces.extend(_CAMEL.findall(part))  # CamelCase / mixedCase
            elif part:
                pieces.append(part)
        words = [p.lower() for p in pieces]
        if len(words) <= 1:
            return self._stems([lower]) if _content(lower) else ()
        # An identifier: kept whole (exact matches rank first) plus its parts.
        return (lower, *self._stems([w for w in words if _content(w)]))

    def _stems(self, words: list[str]) -> tuple[str, ...]:
        with self._stem_lock:
            return tuple(self._stemmer.stemWords(words))


def _content(word: str) -> bool:
    return len(word) >= 2 and word not in STOP_WORDS  # numbers too: "410", "2024", "0044"


def _feature(term: str) -> int:
    hashed: int = mmh3.hash(term, 0)  # signed, as scikit-learn's murmurhash3_32 answers
    return abs(hashed) % N_FEATURES


class Analyzer:
    """Safe to share between threads."""

    def __init__(self) -> None:
        self._terms = Terms()

    @property
    def signature(self) -> dict[str, object]:
        return {"version": ANALYSIS_VERSION, "n_features": N_FEATURES, "weights": "lnc.ltc"}

    def tokens(self, text: str) -> list[str]:
        """Terms in order (stop words dropped, stemmed), as the index sees them."""
        return self._terms.of(text)

    def feature(self, term: str) -> int:
        """The feature id of an analysed term (as `tokens` returns it)."""
        return _feature(term)

    def batch(self, texts: Sequence[str]) -> DocTerms:
        per_text = self._terms.features(texts)
        lengths = np.fromiter(map(len, per_text), dtype=np.int64, count=len(per_text))
        flat = np.fromiter(chain.from_iterable(per_text), dtype=np.int64, count=int(lengths.sum()))
        doc = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
        # one row per (doc, term), sorted by doc then term
        pairs, counts = np.unique(doc * N_FEATURES + flat, return_counts=True)
        return DocTerms(
            pairs // N_FEATURES, pairs % N_FEATURES, counts.astype(np.int64), len(texts)
        )

    def query(self, text: str) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """(sorted unique term ids, 1 + ln(tf)) of a query; idf is applied by the index."""
        features = np.asarray(self._terms.features([text])[0], dtype=np.int64)
        if features.size == 0:
            return features, np.zeros(0, dtype=np.float64)
        terms, counts = np.unique(features, return_counts=True)
        return terms, 1.0 + np.log(counts.astype(np.float64))


def doc_weights(terms: DocTerms) -> NDArray[np.float32]:
    """lnc: `1 + ln(tf)`, each document L2-normalised; float32 as stored on disk."""
    logtf = 1.0 + np.log(terms.count.astype(np.float64))
    norms = np.sqrt(np.bincount(terms.doc, weights=logtf * logtf, minlength=terms.n_docs))
    return (logtf / norms[terms.doc]).astype(np.float32)


def idf(df: NDArray[np.int64], n_docs: int) -> NDArray[np.float64]:
    """scikit-learn's smoothed idf: ln((1 + n) / (1 + df)) + 1."""
    return np.log((1.0 + n_docs) / (1.0 + df.astype(np.float64))) + 1.0


# GitHub's closing keywords (docs: "Linking a pull request to an issue using a keyword"):
# close, closes, closed, fix, fixes, fixed, resolve, resolves, resolved, then #N or owner/name#N.
_CLOSING = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?\s+([\w.-]+/[\w.-]+)?#(\d+)\b",
    re.IGNORECASE,
)


def closing_references(text: str, repo: str) -> tuple[int, ...]:
    """Issue numbers of `repo` a pull request's text closes (`Fixes #12`, `Fixes
    owner/name#12` naming `repo`), in order, no repeats. `Fixes other/lib#12` closes an issue
    of another repository: not this one's #12."""
    seen: dict[int, None] = {}
    for match in _CLOSING.finditer(text):
        named, number = match.group(1), int(match.group(2))
        if named is not None and named.lower() != repo.lower():
            continue
        if 0 < number < 2**31:
            seen.setdefault(number, None)
    return tuple(seen)


def index_text(text: str, paths: Sequence[str]) -> str:
    """What is analysed for a chunk: its text and the paths it touches."""
    return f"{text}\n{' '.join(paths)}" if paths else text
