"""Who may steer a task: the App or a person with write access (pickups, Decisions), and
for reviews a person with write access only, never the App itself nor another bot."""

from __future__ import annotations

from bot.lifecycle.seams import GitHubApi

# GitHub's legacy permission field folds `maintain` into `write`.
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


async def may_act(github: GitHubApi | None, repo: str, login: str, what: str) -> tuple[bool, str]:
    """Whether `login` is the App or has write access on `repo`, and why (or why not)."""
    if github is None:
        return False, "GitHub is not configured, so the author's access cannot be checked"
    if not login:
        return False, f"the sender is unknown; {what} needs write access"
    if await github.is_app_login(login):
        return True, "the App"
    return await _writer(github, repo, login, what)


async def may_review(
    github: GitHubApi | None, repo: str, login: str, *, user_type: str
) -> tuple[bool, str]:
    """Whether a review by `login` (GitHub's `user.type`) may steer the task: a person with
    write access, checked as Decisions are; the App's own comments and any bot's are not
    reviews of the App's work (a bot answering a bot would loop)."""
    if github is None:
        return False, "GitHub is not configured, so the reviewer's access cannot be checked"
    if not login:
        return False, "the reviewer is unknown"
    if await github.is_app_login(login):
        return False, "the App's own comment"
    if user_type == "Bot" or login.endswith("[bot]"):
        return False, f"{login} is a bot"
    return await _writer(github, repo, login, "a review")


async def _writer(github: GitHubApi, repo: str, login: str, what: str) -> tuple[bool, str]:
    permission = await github.collaborator_permission(repo, login)
    if permission in WRITE_PERMISSIONS:
        return True, permission
    return False, f"{login} has {permission} access; {what} needs write access"
