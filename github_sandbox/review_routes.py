"""The REST endpoints for what happens on a pull request after it opens: reviews, review
comments and replies, reactions, its files, reviewers and the merge; under GitHub's paths
and parameter names (as `rest_routes`). Each handler parses, calls one `Reviews` method and
answers; the rules live in `review_ops`."""

from __future__ import annotations

from aiohttp import web

from github_sandbox.rest_common import (
    REPO,
    answer,
    page,
    path_number,
    read_json,
    repo_and_caller,
    sandbox_of,
)
from github_sandbox.review_ops import Reviews
from github_sandbox.review_shapes import review_comment

# The handlers repeat one shape on purpose (a duplicates row), as in `rest_routes`: parse,
# call one method, answer; so the table reads like GitHub's REST reference.
routes = web.RouteTableDef()
PULL = REPO + "/pulls/{pull_number}"


def _reviews(request: web.Request) -> Reviews:
    return Reviews(sandbox_of(request).ops)


@routes.post(PULL + "/reviews")
async def create_review(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "pull_number")
    return answer(request, _reviews(request).create_review(repo, caller.user, number, data))


@routes.get(PULL + "/reviews")
async def list_reviews(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    number = path_number(request, "pull_number")
    return page(request, _reviews(request).list_reviews(repo, number, caller.user))


@routes.get(PULL + "/reviews/{review_id}/comments")
async def list_comments_for_review(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    number = path_number(request, "pull_number")
    review_id = path_number(request, "review_id")
    found = _reviews(request).list_comments_for_review(repo, number, review_id, caller.user)
    return page(request, found)


@routes.get(PULL + "/comments")
async def list_review_comments(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    number = path_number(request, "pull_number")
    query = dict(request.query)
    return page(request, _reviews(request).list_review_comments(repo, number, caller.user, query))


@routes.post(PULL + "/comments")
async def create_review_comment(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "pull_number")
    outcome = _reviews(request).create_review_comment(repo, caller.user, number, data)
    return answer(request, outcome)


@routes.post(PULL + "/comments/{comment_id}/replies")
async def create_reply_for_review_comment(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "pull_number")
    comment_id = path_number(request, "comment_id")
    return answer(request, _reviews(request).reply(repo, caller.user, number, comment_id, data))


@routes.get(REPO + "/pulls/comments/{comment_id}")
async def get_review_comment(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    reviews = _reviews(request)
    found = reviews.review_comment(repo, path_number(request, "comment_id"))
    return web.json_response(review_comment(reviews.shapes, repo, found))


@routes.post(REPO + "/pulls/comments/{comment_id}/reactions")
async def react_to_review_comment(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    reviews = _reviews(request)
    found = reviews.review_comment(repo, path_number(request, "comment_id"))
    return answer(request, reviews.react(found.reactions, caller.user, data))


@routes.post(REPO + "/issues/comments/{comment_id}/reactions")
async def react_to_issue_comment(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    sandbox = sandbox_of(request)
    found = sandbox.ops.comment(repo, path_number(request, "comment_id"))
    return answer(request, _reviews(request).react(found.reactions, caller.user, data))


@routes.get(PULL + "/files")
async def list_files(request: web.Request) -> web.Response:
    repo, _ = repo_and_caller(request)
    return page(request, _reviews(request).list_files(repo, path_number(request, "pull_number")))


@routes.post(PULL + "/requested_reviewers")
async def request_reviewers(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "pull_number")
    return answer(request, _reviews(request).request_reviewers(repo, caller.user, number, data))


@routes.put(PULL + "/merge")
async def merge(request: web.Request) -> web.Response:
    repo, caller = repo_and_caller(request)
    data = await read_json(request)
    number = path_number(request, "pull_number")
    return answer(request, _reviews(request).merge(repo, caller.user, number, data))
