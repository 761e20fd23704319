"""What the App knows about where it is installed: installations and their repositories,
kept from `installation`/`installation_repositories` webhooks (and any repository-scoped
delivery). Core functions take a session; upserts, so a redelivered event changes nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, String, func, select
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
) -> GitHubInstallation:
    row = session.get(GitHubInstallation, installation_id)
    if row is None:
        row = GitHubInstallation(id=installation_id, created_at=now)
        session.add(row)
    if account_login is not None:
        row.account_login = account_login
        row.account_type = account_type
    if suspended is not None:
        row.suspended_at = now if suspended else None
    row.removed_at = None
    row.updated_at = now
    return row


def forget_installation(session: Session, installation_id: int, *, now: datetime) -> None:
    """The App was uninstalled: the installation and its repositories are marked removed."""
    row = session.get(GitHubInstallation, installation_id)
    if row is not None:
        row.removed_at = now
        row.updated_at = now
    for repo in session.scalars(
        select(GitHubRepository).where(GitHubRepository.installation_id == installation_id)
    ):
        repo.removed_at = now
        repo.updated_at = now


def remember_repositories(
    session: Session, installation_id: int | None, repos: Iterable[RepoRef], *, now: datetime
) -> None:
    for ref in repos:
        row = session.get(GitHubRepository, ref.id)
        if row is None:
            # A renamed or transferred repository keeps its id; free the old name's row.
            stale = session.scalar(
                select(GitHubRepository).where(GitHubRepository.full_name == ref.full_name)
            )
            if stale is not None:
                session.delete(stale)
                session.flush()
            row = GitHubRepository(id=ref.id)
            session.add(row)
        row.full_name = ref.full_name
        row.private = ref.private
        if installation_id is not None:
            row.installation_id = installation_id
        row.removed_at = None
        row.updated_at = now


def forget_repositories(session: Session, repo_ids: Iterable[int], *, now: datetime) -> None:
    for repo_id in repo_ids:
        row = session.get(GitHubRepository, repo_id)
        if row is not None:
            row.removed_at = now
            row.updated_at = now


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
