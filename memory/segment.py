"""Immutable on-disk segments: a column-major (term -> postings) slice of the TF-IDF matrix.

A segment is one file, written once under a temporary name, fsynced and renamed into place,
then only ever read (memory-mapped). It holds these arrays (numpy dtypes, little-endian, each
64-byte aligned, their offsets in a JSON header). One file means one fsync per segment, which
is most of the cost of adding chunks on a busy disk. A query looks its few terms up in
`terms` and walks just those postings, so its cost follows the postings it touches, not the
corpus size.

    terms    int32[T]    sorted feature ids present in the segment
    tptr     int64[T+1]  postings of terms[i] are docs/weights[tptr[i]:tptr[i+1]]
    docs     int32[P]    local document number of each posting
    weights  float32[P]  lnc weight of the term in that document
    ids      int64[D]    chunk id of each local document, ascending
    repo     int32[D]    repository code (the manifest's `repos` table)
    issue    int32[D]    issue/PR number, 0 for none
    poffs    int64[D+1]  byte offsets of each document's JSON record in `payload`
    payload  uint8[...]  the records: provenance and text, returned with hits
    lptr     int64[D+1]  issues a document links are links[lptr[i]:lptr[i+1]]
    links    int32[L]    issue numbers pull requests close (`Fixes #12`), found at indexing
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from memory.analysis import Analyzer, closing_references, doc_weights, index_text
from memory.errors import IndexCorrupt

MAGIC = b"SFSEG002"  # 002: links
_PREFIX = struct.Struct("<8sQ")  # magic, header size
_ALIGN = 64
HEADER_BYTES = 1024  # magic, header size and the JSON layout; the arrays start after it
ARRAYS = (
    "terms",
    "tptr",
    "docs",
    "weights",
    "ids",
    "repo",
    "issue",
    "poffs",
    "payload",
    "lptr",
    "links",
)
_DTYPES = {
    "terms": np.int32,
    "tptr": np.int64,
    "docs": np.int32,
    "weights": np.float32,
    "ids": np.int64,
    "repo": np.int32,
    "issue": np.int32,
    "poffs": np.int64,
    "payload": np.uint8,
    "lptr": np.int64,
    "links": np.int32,
}


@dataclass(frozen=True)
class Record:
    """A chunk as the index keeps it (the database row is the source of truth)."""

    id: int
    source: str
    repo: str
    text: str
    issue: int | None = None
    session_id: str | None = None
    paths: tuple[str, ...] = ()
    created_at: str | None = None
    links: tuple[int, ...] = ()  # issues this pull request closes (`Fixes #12`)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "repo": self.repo,
            "issue": self.issue,
            "session_id": self.session_id,
            "paths": list(self.paths),
            "created_at": self.created_at,
            "links": list(self.links),
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        return cls(
            id=int(data["id"]),
            source=str(data["source"]),
            repo=str(data["repo"]),
            text=str(data["text"]),
            issue=data.get("issue"),
            session_id=data.get("session_id"),
            paths=tuple(data.get("paths") or ()),
            created_at=data.get("created_at"),
            links=tuple(int(n) for n in data.get("links") or ()),
        )


@dataclass(frozen=True)
class Segment:
    name: str
    terms: NDArray[np.int32]
    tptr: NDArray[np.int64]
    docs: NDArray[np.int32]
    weights: NDArray[np.float32]
    ids: NDArray[np.int64]
    repo: NDArray[np.int32]
    issue: NDArray[np.int32]
    poffs: NDArray[np.int64]
    payload: NDArray[np.uint8]
    lptr: NDArray[np.int64]
    links: NDArray[np.int32]

    @property
    def n_docs(self) -> int:
        return int(self.ids.shape[0])

    @property
    def n_postings(self) -> int:
        return int(self.docs.shape[0])

    @classmethod
    def load(cls, path: Path, *, docs: int, postings: int) -> Segment:
        """Memory-map a segment file; its header and shapes are checked against the
        manifest, so a truncated or foreign file is IndexCorrupt, never a wrong answer."""
        with open(path, "rb") as handle:  # FileNotFoundError passes: a merge raced us
            size = os.fstat(handle.fileno()).st_size
            if size < _PREFIX.size:
                raise IndexCorrupt(f"segment {path.name}: file is truncated")
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            magic, header_size = _PREFIX.unpack_from(mapped, 0)
            if magic != MAGIC:
                raise IndexCorrupt(f"segment {path.name}: not a segment file")
            header = json.loads(mapped[_PREFIX.size : _PREFIX.size + header_size])
            arrays: dict[str, Any] = {}
            for name in ARRAYS:
                offset, count = header[name]
                dtype = np.dtype(_DTYPES[name])
                if offset + count * dtype.itemsize > size:
                    raise IndexCorrupt(f"segment {path.name}: {name} runs past the end of the file")
                # frombuffer gives plain ndarrays over the map (np.memmap runs Python code on
                # every slice, which a query does hundreds of times).
                arrays[name] = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset)
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            raise IndexCorrupt(f"segment {path.name}: header unreadable ({exc})") from exc
        segment = cls(name=path.name, **arrays)
        segment._check(docs=docs, postings=postings)
        return segment

    def _check(self, *, docs: int, postings: int) -> None:
        t = self.terms.shape[0]
        ok = (
            self.tptr.shape[0] == t + 1
            and self.n_docs == docs
            and self.n_postings == postings
            and self.weights.shape[0] == postings
            and self.repo.shape[0] == docs
            and self.issue.shape[0] == docs
            and self.poffs.shape[0] == docs + 1
            and (t == 0 or (int(self.tptr[0]) == 0 and int(self.tptr[-1]) == postings))
            and (docs == 0 or int(self.poffs[-1]) == self.payload.shape[0])
            and self.lptr.shape[0] == docs + 1
            and int(self.lptr[-1]) == self.links.shape[0]
        )
        if not ok:
            raise IndexCorrupt(f"segment {self.name}: contents do not match the manifest")

    def record(self, local: int) -> Record:
        start, end = int(self.poffs[local]), int(self.poffs[local + 1])
        try:
            return Record.from_json(json.loads(self.payload[start:end].tobytes()))
        except (ValueError, KeyError, TypeError) as exc:
            raise IndexCorrupt(f"segment {self.name}: record {local} unreadable") from exc

    def linking(self, issues: NDArray[np.int64]) -> NDArray[np.int64]:
        """Local numbers of the documents that link (close) any of `issues`."""
        if self.links.shape[0] == 0 or issues.size == 0:
            return np.zeros(0, dtype=np.int64)
        at = np.flatnonzero(np.isin(self.links, issues))
        return np.unique(np.searchsorted(self.lptr, at, side="right") - 1).astype(np.int64)

    def locals_of(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        """Local numbers of the given chunk ids that live in this segment."""
        if self.n_docs == 0 or ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        pos = np.searchsorted(self.ids, ids)
        pos = np.minimum(pos, self.n_docs - 1)
        found: NDArray[np.bool_] = self.ids[pos] == ids  # numpy types `==` of arrays as Any
        return pos[found].astype(np.int64)


@dataclass(frozen=True)
class SegmentInfo:
    name: str
    docs: int
    postings: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "docs": self.docs, "postings": self.postings}


RepoCode = Callable[[str], int]


class SegmentBuilder:
    """Accumulates analysed batches (records ascending by id) and writes one segment.

    Each batch is analysed as it arrives and kept as compact arrays, so building a large
    segment never holds more than one batch of Python token lists.
    """

    def __init__(self, *, repo_code: RepoCode, analyzer: Analyzer) -> None:
        self._repo_code = repo_code
        self._analyzer = analyzer
        self._terms: list[NDArray[np.int32]] = []
        self._docs: list[NDArray[np.int32]] = []
        self._weights: list[NDArray[np.float32]] = []
        self._ids: list[NDArray[np.int64]] = []
        self._repo: list[NDArray[np.int32]] = []
        self._issue: list[NDArray[np.int32]] = []
        self._blobs: list[bytes] = []
        self._lengths: list[NDArray[np.int64]] = []
        self._links: list[int] = []
        self._link_counts: list[int] = []
        self.n_docs = 0

    def add(self, records: Sequence[Record]) -> None:
        if not records:
            return
        records = [with_links(r) for r in records]
        terms = self._analyzer.batch([index_text(r.text, r.paths) for r in records])
        self._terms.append(terms.term.astype(np.int32))
        self._docs.append((terms.doc + self.n_docs).astype(np.int32))
        self._weights.append(doc_weights(terms))
        n = len(records)
        self._ids.append(np.fromiter((r.id for r in records), np.int64, n))
        self._repo.append(np.fromiter((self._repo_code(r.repo) for r in records), np.int32, n))
        self._issue.append(np.fromiter((r.issue or 0 for r in records), np.int32, n))
        # json.dumps with default options runs on the cached C encoder
        blobs = [json.dumps(r.to_json()).encode() for r in records]
        self._lengths.append(np.fromiter(map(len, blobs), np.int64, n))
        self._blobs.append(b"".join(blobs))
        for record in records:
            self._links.extend(record.links)
            self._link_counts.append(len(record.links))
        self.n_docs += n

    def write(self, path: Path) -> SegmentInfo:
        term = _concat(self._terms, np.int32)
        # Batches arrive sorted by (doc, term); a stable sort by term keeps docs ascending.
        order = np.argsort(term, kind="stable")
        postings = _postings(
            term[order],
            _concat(self._docs, np.int32)[order],
            _concat(self._weights, np.float32)[order],
        )
        del term, order
        lengths = _concat(self._lengths, np.int64)
        arrays = {
            **postings,
            "ids": _concat(self._ids, np.int64),
            "repo": _concat(self._repo, np.int32),
            "issue": _concat(self._issue, np.int32),
            "poffs": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            "lptr": np.concatenate([[0], np.cumsum(self._link_counts, dtype=np.int64)]).astype(
                np.int64
            ),
            "links": np.asarray(self._links, dtype=np.int32),
        }
        ids = arrays["ids"]
        if ids.size > 1 and not bool(np.all(ids[1:] > ids[:-1])):
            raise ValueError("segment records must have strictly ascending ids")
        return _write(path, arrays, self._blobs)


def with_links(record: Record) -> Record:
    """A pull request's record with the issues its text closes (indexing finds them, so a
    rebuild finds the same)."""
    if record.links or record.source != "pull_request":
        return record
    links = closing_references(record.text, record.repo)
    return replace(record, links=links) if links else record


def _concat(parts: list[NDArray[Any]], dtype: Any) -> NDArray[Any]:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def merge_segments(path: Path, segments: Sequence[Segment], dead: NDArray[np.int64]) -> SegmentInfo:
    """One segment holding the live documents of `segments`, ascending by chunk id.

    Weights are copied, never recomputed, so a merged segment scores exactly as its inputs.
    """
    ids = np.concatenate([s.ids for s in segments]) if segments else np.zeros(0, np.int64)
    keep = ~np.isin(ids, dead)
    kept = np.flatnonzero(keep)
    order = kept[np.argsort(ids[kept], kind="stable")]
    new_local = np.full(ids.shape[0], -1, dtype=np.int64)
    new_local[order] = np.arange(order.shape[0], dtype=np.int64)
    term_parts, doc_parts, weight_parts = [], [], []
    base = 0
    for segment in segments:
        counts = np.diff(segment.tptr)
        local = new_local[base + np.asarray(segment.docs, dtype=np.int64)]
        live = local >= 0
        term_parts.append(np.repeat(np.asarray(segment.terms, np.int64), counts)[live])
        doc_parts.append(local[live])
        weight_parts.append(np.asarray(segment.weights)[live])
        base += segment.n_docs
    term = np.concatenate(term_parts) if term_parts else np.zeros(0, np.int64)
    doc = np.concatenate(doc_parts) if doc_parts else np.zeros(0, np.int64)
    weight = np.concatenate(weight_parts) if weight_parts else np.zeros(0, np.float32)
    by_term = np.argsort(term * (1 << 32) + doc, kind="stable")
    starts = np.concatenate([[0], np.cumsum([s.n_docs for s in segments])]).astype(np.int64)
    owner = np.searchsorted(starts, order, side="right") - 1
    chunks: list[bytes] = []
    links: list[NDArray[np.int32]] = []
    for seg_index, position in zip(owner.tolist(), order.tolist(), strict=True):
        segment = segments[seg_index]
        local = position - int(starts[seg_index])
        chunks.append(segment.payload[segment.poffs[local] : segment.poffs[local + 1]].tobytes())
        links.append(segment.links[segment.lptr[local] : segment.lptr[local + 1]])
    lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    all_ids = ids[order]
    arrays = {
        **_postings(term[by_term], doc[by_term], weight[by_term]),
        "ids": all_ids.astype(np.int64),
        "repo": _gather(segments, "repo", order),
        "issue": _gather(segments, "issue", order),
        "poffs": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "lptr": np.concatenate([[0], np.cumsum([part.size for part in links], dtype=np.int64)]),
        "links": np.concatenate(links).astype(np.int32) if links else np.zeros(0, np.int32),
    }
    return _write(path, arrays, chunks)


def _gather(segments: Sequence[Segment], name: str, order: NDArray[np.int64]) -> NDArray[np.int32]:
    values = np.concatenate([np.asarray(getattr(s, name)) for s in segments])
    return values[order].astype(np.int32) if order.size else np.zeros(0, np.int32)


def _postings(
    term: NDArray[np.int64], doc: NDArray[np.int64], weight: NDArray[np.float32]
) -> dict[str, NDArray[Any]]:
    if term.size == 0:
        return {
            "terms": np.zeros(0, np.int32),
            "tptr": np.zeros(1, np.int64),
            "docs": np.zeros(0, np.int32),
            "weights": np.zeros(0, np.float32),
        }
    first = np.empty(term.size, dtype=bool)
    first[0] = True
    np.not_equal(term[1:], term[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    return {
        "terms": term[starts].astype(np.int32),
        "tptr": np.append(starts, term.size).astype(np.int64),
        "docs": doc.astype(np.int32),
        "weights": weight.astype(np.float32),
    }


def _write(path: Path, arrays: dict[str, NDArray[Any]], payload: Sequence[bytes]) -> SegmentInfo:
    """One file: magic, header size, JSON header {array: [offset, count]}, then the arrays,
    each 64-byte aligned; fsynced once (adds are dominated by fsyncs on a busy disk).
    The payload is streamed from its parts, never joined in memory."""
    sizes = {name: arrays[name].shape[0] for name in ARRAYS if name != "payload"}
    sizes["payload"] = sum(map(len, payload))
    layout: dict[str, list[int]] = {}
    offset = HEADER_BYTES
    for name in ARRAYS:
        layout[name] = [offset, sizes[name]]
        offset = _align(offset + sizes[name] * np.dtype(_DTYPES[name]).itemsize)
    header = json.dumps(layout).encode()
    if _PREFIX.size + len(header) > HEADER_BYTES:
        raise ValueError("segment header does not fit")
    with open(path, "xb") as handle:
        handle.write(_PREFIX.pack(MAGIC, len(header)))
        handle.write(header)
        for name in ARRAYS:
            handle.seek(layout[name][0])
            if name == "payload":
                for part in payload:
                    handle.write(part)
            else:
                handle.write(np.ascontiguousarray(arrays[name], dtype=_DTYPES[name]).tobytes())
        handle.truncate(offset)  # the file covers every array, empty trailing ones too
        handle.flush()
        os.fsync(handle.fileno())
    return SegmentInfo(path.name, sizes["ids"], sizes["docs"])


def _align(offset: int) -> int:
    return (offset + _ALIGN - 1) // _ALIGN * _ALIGN


def remove_segment(path: Path) -> None:
    path.unlink(missing_ok=True)
