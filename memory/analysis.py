"""Text analysis: tokens, hashed features and TF-IDF weights, the same for chunks and queries.

Features are exactly scikit-learn's `HashingVectorizer(n_features=2**20, alternate_sign=False,
stop_words="english")` (default token pattern, lowercase, signed murmurhash3 seed 0, `abs`
modulo n_features); a test checks that equivalence. Tokenising is done here (an ASCII fast
path), because the vectorizer's regex and per-token Python filtering alone would use most of
the budget for adding 1,000 chunks. Weights are SMART `lnc.ltc` (docs/memory.md says why):

- a chunk's weight is `1 + ln(tf)`, L2-normalised over the chunk: no corpus statistic, so a
  stored chunk never changes when others arrive and rebuild equals incremental exactly;
- a query's weight is `(1 + ln(tf)) * idf`, idf computed at query time from the kept
  document frequencies, L2-normalised over the query terms known to the index.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import filterfalse

import numpy as np
from numpy.typing import NDArray
from sklearn.feature_extraction import FeatureHasher
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
from sklearn.utils import murmurhash3_32

N_FEATURES = 2**20
# Bump when tokens, hashing or weights change: an index built another way must be rebuilt.
ANALYSIS_VERSION = 1
# sklearn's default token pattern `(?u)\b\w\w+\b`: a maximal run of word characters is
# always bounded by word boundaries, so this shorter form finds the same tokens, faster.
_TOKEN = re.compile(r"\w\w+")
# ASCII fast path: bytes.translate maps every non-word byte to a space and lower-cases, so
# `split()` yields the same maximal word runs as the regex (plus 1-character runs, dropped
# with the stop words), at a fraction of the regex's cost.
_ASCII_WORD = frozenset(string.ascii_letters.encode() + string.digits.encode() + b"_")
_ASCII_TABLE = bytes(
    (b + 32 if 65 <= b <= 90 else b) if b in _ASCII_WORD else 0x20 for b in range(256)
)
_DROP = frozenset(ENGLISH_STOP_WORDS) | frozenset(string.ascii_lowercase + string.digits + "_")


def _words(text: str) -> list[str]:
    """Content tokens in order: lower-cased word runs, stop words and 1-character runs out."""
    if text.isascii():
        runs = text.encode("ascii").translate(_ASCII_TABLE).decode("ascii").split()
    else:
        runs = _TOKEN.findall(text.lower())
    return list(filterfalse(_DROP.__contains__, runs))


def _feature(token: str) -> int:
    return abs(murmurhash3_32(token, seed=0)) % N_FEATURES


@dataclass(frozen=True)
class DocTerms:
    """Term occurrences of a batch of documents, sorted by (doc, term); one row per pair."""

    doc: NDArray[np.int64]
    term: NDArray[np.int64]
    count: NDArray[np.int64]
    n_docs: int


class Analyzer:
    """Stateless; safe to share between threads."""

    def __init__(self) -> None:
        # Batches are hashed in scikit-learn's compiled loop (the one HashingVectorizer runs).
        self._hasher = FeatureHasher(
            n_features=N_FEATURES, input_type="string", alternate_sign=False
        )

    @property
    def signature(self) -> dict[str, object]:
        return {"version": ANALYSIS_VERSION, "n_features": N_FEATURES, "weights": "lnc.ltc"}

    def tokens(self, text: str) -> list[str]:
        """Content tokens in order (stop words dropped), as the index sees them."""
        return _words(text)

    def feature(self, token: str) -> int:
        return _feature(token.lower())

    def batch(self, texts: Sequence[str]) -> DocTerms:
        matrix = self._hasher.transform([_words(text) for text in texts])
        matrix.sum_duplicates()  # one entry per (doc, term), terms sorted within each doc
        doc = np.repeat(np.arange(len(texts), dtype=np.int64), np.diff(matrix.indptr))
        return DocTerms(
            doc, matrix.indices.astype(np.int64), matrix.data.astype(np.int64), len(texts)
        )

    def query(self, text: str) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """(sorted unique term ids, 1 + ln(tf)) of a query; idf is applied by the index."""
        features = np.fromiter(map(_feature, _words(text)), dtype=np.int64)
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


def index_text(text: str, paths: Sequence[str]) -> str:
    """What is analysed for a chunk: its text and the paths it touches."""
    return f"{text}\n{' '.join(paths)}" if paths else text
