"""What the App knows about where it is installed: installations and their repositories,
kept from `installation`/`installation_repositories` webhooks (and any repository-scoped
delivery). Core functions take a session; upserts, so a redelivered event changes nothing,
and writes that read nothing first, so deliveries arriving together never conflict."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, String, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from bot.db import Base, Database


class GitHubInstallation(Base):
    __tablename__ = "github_installations"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    account_login: Mapped[str | None] = mapped_column(String(100))
    account_type: Mapped[str | None] = mapped_column(String(40))
    suspended_at: Mapped[datetime | None]
    removed_at: Mapped[datetime | None]
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class GitHubRepository(Base):
    __tablename__ = "github_repositories"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    full_name: Mapped[str] = mapped_column(String(200), unique=True)
    # No foreign key: a repository-scoped delivery can name an installation (id only)
    # before its `installation` event has arrived.
    installation_id: Mapped[int | None] = mapped_column(BigInteger, index=True)
    private: Mapped[bool] = mapped_column(default=False)
    removed_at: Mapped[datetime | None]
    updated_at: Mapped[datetime]


@dataclass(frozen=True)
class RepoRef:
    id: int
    full_name: str
    private: bool = False


def remember_installation(
    session: Session,
    installation_id: int,
    *,
    account_login: str | None,
    account_type: str | None,
    now: datetime,
    suspended: bool | None = None,
) -> None:
    """One upsert, as `remember_repositories` (why there)."""
    changes: dict[str, object] = {"removed_at": None, "updated_at": now}
    if account_login is not None:
        changes.update(account_login=account_login, account_type=account_type)
    if suspended is not None:
        changes["suspended_at"] = now if suspended else None
    _upsert(session, GitHubInstallation, {"id": installation_id, "created_at": now}, changes)


def forget_installation(session: Session, installation_id: int, *, now: datetime) -> None:
    """The App was uninstalled: the installation and its repositories are marked removed."""
    gone = {"removed_at": now, "updated_at": now}
    session.execute(
        update(GitHubInstallation).where(GitHubInstallation.id == installation_id).values(gone)
    )
    served = GitHubRepository.installation_id == installation_id
    # Its repositories' rows locked in id order first (PostgreSQL; SQLite locks the file), as
    # `remember_repositories` writes them: an update by installation would lock in the
    # table's order, and two transactions could each wait for a row the other holds.
    session.execute(
        select(GitHubRepository.id).where(served).order_by(GitHubRepository.id).with_for_update()
    )
    session.execute(update(GitHubRepository).where(served).values(gone))


# How often `remember_repositories` writes again after losing a repository's name to a
# concurrent commit (PostgreSQL).
NAME_RACE_ATTEMPTS = 5


def remember_repositories(
    session: Session, installation_id: int | None, repos: Iterable[RepoRef], *, now: datetime
) -> None:
    """Each repository in statements that read nothing first. Deliveries about one repository
    arrive together, each in its own transaction: read-then-write let two of them both insert
    its row (a duplicate key), both delete the row its old id left (StaleDataError) or update
    a row another had just deleted, and the delivery failed until its retry. Rows are written
    in id order, so two transactions writing several never wait on each other in a cycle."""
    refs = sorted(repos, key=lambda ref: ref.id)
    if session.get_bind().dialect.name != "postgresql":
        # SQLite: one writer holds the file, so no other transaction's row can appear
        # between these statements.
        _write_repositories(session, installation_id, refs, now)
        return
    # PostgreSQL's upsert arbitrates on the id only. The name's unique index is checked as
    # the row goes in, and when another transaction has an uncommitted row holding the name
    # (the same repository inserted a moment earlier, or under its other id), the check
    # waits for it to commit and then fails. That row is committed by then, and each
    # statement here sees what committed before it (READ COMMITTED): written again, the
    # upsert updates it or the delete frees the name. Bounded: each retry follows a commit.
    for attempt in range(1, NAME_RACE_ATTEMPTS + 1):
        try:
            with session.begin_nested():
                _write_repositories(session, installation_id, refs, now)
            return
        except IntegrityError:
            if attempt == NAME_RACE_ATTEMPTS:
                raise


def _write_repositories(
    session: Session, installation_id: int | None, refs: list[RepoRef], now: datetime
) -> None:
    for ref in refs:
        # A renamed or transferred repository keeps its id; a repository deleted and made
        # again under its name has a new one: free the name from any other id's row.
        session.execute(
            delete(GitHubRepository)
            .where(GitHubRepository.full_name == ref.full_name, GitHubRepository.id != ref.id)
            .execution_options(synchronize_session=False)
        )
        changes: dict[str, object] = {
            "full_name": ref.full_name,
            "private": ref.private,
            "removed_at": None,
            "updated_at": now,
        }
        if installation_id is not None:  # else the one recorded stays
            changes["installation_id"] = installation_id
        _upsert(session, GitHubRepository, {"id": ref.id}, changes)


def forget_repositories(session: Session, repo_ids: Iterable[int], *, now: datetime) -> None:
    for repo_id in sorted(repo_ids):  # id order, as `remember_repositories` writes
        session.execute(
            update(GitHubRepository)
            .where(GitHubRepository.id == repo_id)
            .values(removed_at=now, updated_at=now)
        )


def _upsert(
    session: Session,
    model: type[GitHubInstallation] | type[GitHubRepository],
    key: dict[str, object],
    changes: dict[str, object],
) -> None:
    """Insert `key` and `changes` as a new row, or apply `changes` to the row with that id:
    one statement (PostgreSQL's and SQLite's INSERT ... ON CONFLICT), which waits for a
    concurrent insert of the same id and then updates it instead of failing."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    session.execute(
        insert(model)
        .values({**key, **changes})
        .on_conflict_do_update(index_elements=[model.id], set_=changes)
    )


def installation_for(session: Session, full_name: str) -> int | None:
    """The installation serving `full_name`, as the webhooks told us (None if unknown or
    suspended). Names compare case-insensitively, as GitHub's do."""
    return session.scalar(
        select(GitHubRepository.installation_id)
        .outerjoin(GitHubInstallation, GitHubInstallation.id == GitHubRepository.installation_id)
        .where(
            func.lower(GitHubRepository.full_name) == full_name.lower(),
            GitHubRepository.removed_at.is_(None),
            GitHubInstallation.removed_at.is_(None),
            GitHubInstallation.suspended_at.is_(None),
        )
    )


def stored_installations(db: Database) -> Callable[[str], Awaitable[int | None]]:
    """`installation_for` as the GitHub client's lookup asks it (off the event loop)."""

    async def lookup(full_name: str) -> int | None:
        return await db.run(installation_for, full_name)

    return lookup
