"""Related terms: words that name the same thing ("deploy" and "ship", "dump" and
"backup"), applied to a question at query time so that a question in other words than the
chunk's can still find it.

Stemming bridges forms of one word; pseudo-relevance feedback (memory.feedback) bridges the
vocabulary of hits already found; neither bridges a question that shares no word with its
answer. Related terms do, at a fraction of an original term's weight (RELATED_WEIGHT), so an
exact match still ranks first. They are never consulted for indexing (the index and its
analysis version do not depend on them), and a related term the index does not know is
dropped. Three sources, merged per turn (docs/memory.md, Where domain words come from):

- GROUPS below: a domain-neutral default, software and operations words any team uses;
- the installation's own domain words, learned from its memory (memory.domain);
- an optional `related:` table in the repository's committed memory
  (`docs/memory/related.yml`, memory.committed.read_related), in the same syntax.

Who wrote GROUPS and when: the author of the first labelled set (tests/data/
grounding_set.json) wrote the table on 2026-12-01 (commit 218f7ec) and extended it the same
day after reading the set's missed paraphrases (b3dddb6). On 2026-12-05 the grounding helper
cut it, without reading any per-question result of the frozen part or the second set, to the
groups of the first version that
name software and operations things, dropping every later group and word and the
bookkeeping ones (invoices, payments, fees, currencies, banks, ledgers, VAT, rounding,
numbering, receipts, quarters) and the two that each served one question (musl/alpine,
rust). Nothing was added.

Each line of GROUPS is one group: entries separated by commas; an entry of several words
("rate limit") applies when all of them are in the question, and adds all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memory.analysis import Analyzer
from memory.feedback import Expansion
from memory.snapshot import Snapshot

# An added term's tf, as a share of a question term's (before idf): for a question word the
# index knows, and for one it has never seen (nothing else can find its meaning).
RELATED_WEIGHT = 0.5
UNKNOWN_WEIGHT = 1.0

GROUPS = """
customer, client
tenant, company, organisation, organization, workspace
user, person, people, colleague, coworker, staff, employee, member
admin, administrator, owner
deploy, release, ship, rollout, rollback
migration, schema change, alter table, ddl
lock, freeze, block, stall, hang, wait
kill, terminate, restart, crash, die, dead
container, docker, image, pod
server, host, machine, box, instance, node, vm
database, db, postgres, postgresql, sql
load balancer, proxy, ingress, alb, elb
health check, probe, liveness, readiness, healthz, livez, readyz
switchover, failover, cutover, swap
upgrade, update, bump, version
size, big, small, shrink, grow, footprint, mb, gb
slow, latency, performance, speed, fast, throughput
error, exception, failure, fault, traceback
monitoring, alert, sentry, observability, error tracker
email, mail, message, notification, notify, notice
spam, junk
password, credential, passphrase
reset, forgot, forgotten, recover
login, log in, sign in, signin, authentication, auth, logon
sso, single sign-on, saml, federated, identity provider, idp, oidc, azure ad
token, api key, access key, key, credential
expire, expiry, lapse, ttl, valid, validity
throttle, rate limit, 429, too many requests, quota
status code, http status, response code
backup, snapshot, dump
restore, recover, recovery, bring back
flaky, intermittent, flake, sporadic, random
timezone, time zone, tz, utc, zone, offset
schedule, cron, scheduled, periodic, recurring, recurrence
queue, task queue, job queue, broker, rq, celery
job, task, worker, background
retry, rerun, attempt
duplicate, twice, double, repeat, idempotent
delete, deletion, remove, purge, erase, drop
audit log, audit trail, history, changelog
storage, s3, bucket, object storage, blob
file, document, attachment
pdf, printable, print, document
render, generate, rendering, renderer, converter
template, layout, theme
font, glyph, typeface
accessibility, a11y, screen reader, assistive, blind, aria
keyboard, shortcut, hotkey
translate, translation, localization, localisation, i18n, l10n, language, locale
separator, delimiter, decimal, thousands
upload, attach
logo, picture, image, avatar, svg, png
xss, script, javascript, injection
security, vulnerability, exploit, attacker, leak, exposed
enumerate, enumeration, guess, sequential, predictable, iterate
public, anyone, unauthenticated, anonymous, without auth
ci, pipeline, build, github actions, workflow
dependency, package, library, wheel, requirement
compile, build, install
staging, preproduction, preprod, sandbox, test environment
production, prod, live
gdpr, privacy, personal data, data protection
export, download
import, csv, spreadsheet, excel
report, reporting, dashboard, chart, graph
phone, mobile, small screen, touch
search, find, lookup, filter
editor, form, input
draft, unsaved, autosave
session, idle, timeout, inactivity
concurrent, concurrency, blocking, event loop, async, parallel, inline
2fa, two-factor, totp, mfa, otp
webhook, callback, event
signature, signed, hmac, verify
archive, retention
cancel, cancellation
uptime, availability, downtime, outage, sla, incident
decide, decision, choose, chose, choice, pick
trade-off, drawback, downside, lose, losing, give up, cost
ip, ip address, nat, network
lockout, locked out, blocked
typo, mistype, wrong password, failed login
dark mode, theme, colour scheme, color scheme
slow test, test suite, tests
cache, caching, memoize
nightly, midnight, night
""".strip()


# Learned domain words weigh less than the table's: they are related, not synonyms.
LEARNED_WEIGHT = 0.3

Group = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Related:
    """Related-term groups, analysed: entries as tuples of terms, grouped; `weight` is the
    weight a related term of these groups is added at (for known question words)."""

    groups: tuple[Group, ...]
    weight: float = RELATED_WEIGHT
    _by_term: dict[str, tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        index: dict[str, list[int]] = {}
        for at, group in enumerate(self.groups):
            for entry in group:
                index.setdefault(entry[0], []).append(at)
        self._by_term.update((term, tuple(ats)) for term, ats in index.items())

    @classmethod
    def analysed(
        cls,
        tokens: Callable[[str], list[str]],
        text: str = GROUPS,
        *,
        weight: float = RELATED_WEIGHT,
    ) -> Related:
        return cls.of_lines(tokens, text.splitlines(), weight=weight)

    @classmethod
    def of_lines(
        cls,
        tokens: Callable[[str], list[str]],
        lines: Iterable[str],
        *,
        weight: float = RELATED_WEIGHT,
    ) -> Related:
        """Groups from lines of comma-separated entries (GROUPS, a `related:` table)."""
        groups = []
        for line in lines:
            entries = {tuple(tokens(e)) for e in line.split(",")}
            entries.discard(())
            if len(entries) > 1:
                groups.append(tuple(sorted(entries)))
        return cls(tuple(groups), weight)

    @classmethod
    def of_terms(cls, groups: Iterable[tuple[str, ...]], *, weight: float) -> Related:
        """Groups of single analysed terms (memory.domain's learned words)."""
        return cls(tuple(tuple((t,) for t in group) for group in groups if len(group) > 1), weight)

    def of(self, terms: list[str], known: set[str]) -> dict[str, float]:
        """The terms related to a question's `terms` (analysed) and not in them, each with
        its weight: UNKNOWN_WEIGHT when it stands in for question words the index has never
        seen (they cannot match anything themselves), `weight` otherwise."""
        have = set(terms)
        added: dict[str, float] = {}
        candidates = sorted({at for term in have for at in self._by_term.get(term, ())})
        for at in candidates:
            group = self.groups[at]
            sources = [entry for entry in group if set(entry) <= have]
            if not sources:
                continue
            unknown = all(not set(entry) & known for entry in sources)
            weight = UNKNOWN_WEIGHT if unknown else self.weight
            for entry in group:
                for term in entry:
                    if term not in have:
                        added[term] = max(added.get(term, 0.0), weight)
        return added


def related_of(sources: Sequence[Related], terms: list[str], known: set[str]) -> dict[str, float]:
    """`Related.of` over several sources (the table, committed, learned): the strongest
    weight of each related term."""
    added: dict[str, float] = {}
    for source in sources:
        for term, weight in source.of(terms, known).items():
            added[term] = max(added.get(term, 0.0), weight)
    return added


def expand(
    analyzer: Analyzer, snapshot: Snapshot, related: Sequence[Related], query: str
) -> Expansion:
    """The question's terms plus its related terms that the index knows (memory.related)."""
    terms, tf = analyzer.query(query)
    if snapshot.live_docs == 0:
        return Expansion(terms, tf, ())
    tokens = analyzer.tokens(query)
    df = snapshot.df(np.asarray([analyzer.feature(t) for t in tokens], dtype=np.int64))
    known = {t for t, d in zip(tokens, df.tolist(), strict=True) if d > 0}
    weights = related_of(related, tokens, known)
    names = list(weights)
    if not names:
        return Expansion(terms, tf, ())
    features = np.asarray([analyzer.feature(t) for t in names], dtype=np.int64)
    usable = (snapshot.df(features) > 0) & ~np.isin(features, terms)
    features, first = np.unique(features[usable], return_index=True)
    if features.size == 0:
        return Expansion(terms, tf, ())
    kept = [n for n, ok in zip(names, usable.tolist(), strict=True) if ok]
    chosen = [kept[i] for i in first.tolist()]
    all_terms = np.concatenate([terms, features])
    all_tf = np.concatenate([tf, np.asarray([weights[n] for n in chosen])])
    order = np.argsort(all_terms, kind="stable")
    return Expansion(all_terms[order], all_tf[order], tuple(sorted(chosen)))
