// The pull request loop on the Board card, in the run modal and on the Dashboard: the pull
// request's state (draft, open, merged, closed), the review thread ledger ("2 open · 3
// addressed", from the server so the TUI and Chat read the same words) and "ready for
// review". Everything from GitHub (review text, reasons, authors) goes in as text nodes.
import { h, externalLink } from "./dom.js";

export const FINAL = new Set(["merged", "closed"]);
// The thread states as people read them (the API's values are machine words).
export const THREAD_WORDS = {
  open: "open",
  addressed: "addressed",
  declined: "declined",
  needs_operator: "needs operator",
};
const PR_WORDS = { draft: "draft PR", open: "PR open", merged: "merged", closed: "closed" };

// The pull request's state: merged and closed are the task's own (final) states, so a live
// `task` event that ends the task shows at once, before the Board reloads.
export function prState(task) {
  if (FINAL.has(task.state)) return task.state;
  return task.pr_state ?? null;
}

// Ready for review: the server's verdict, while the task is still `delivered` (a live `task`
// event that moves it on, to a run or a merge, ends it before the Board reloads).
// The server's rule (bot/lifecycle/review_ledger.ready_for_review): delivered with no thread
// open. Read from the state and the counts, which the `task` and `ledger` events each keep
// current: a review run's `ledger` event comes before its task is delivered again.
export function isReady(task) {
  return task.state === "delivered" && (task.review?.open ?? 0) === 0;
}

// The card's line about the pull request: its state (linked), the ledger, ready or not.
export function cardPull(task) {
  const state = prState(task);
  if (!state) return null;
  const summary = task.review?.summary || "";
  return h(
    "div",
    { class: "card-pull", "data-pr-state": state },
    task.pr_url
      ? h("a", { class: `pr-state ${state}`, href: task.pr_url, target: "_blank", rel: "noopener noreferrer", text: PR_WORDS[state] })
      : h("span", { class: `pr-state ${state}`, text: PR_WORDS[state] }),
    summary ? h("span", { class: "ledger-summary", text: summary, title: "Review threads" }) : null,
    isReady(task) ? h("span", { class: "ready", text: "ready for review" }) : null,
  );
}

// A `ledger` or `task` event: the task's counts, PR state and readiness, as the Board's
// list has them.
export function withLedger(task, event) {
  return {
    ...task,
    pr_url: event.pr_url ?? task.pr_url,
    pr_state: event.pr_state ?? task.pr_state,
    review: event.review ?? task.review,
    ready_for_review: event.ready_for_review ?? task.ready_for_review,
  };
}

// The run modal's part: how the pull request ended, then every review thread.
export function modalPull(detail) {
  const parts = [];
  const state = prState(detail);
  if (FINAL.has(detail.state)) {
    const ended = detail.state === "merged" ? "Merged" : "Closed without a merge";
    const why = [...(detail.events || [])].reverse().find((e) => e.to === detail.state)?.detail;
    parts.push(
      h("h3", { text: "Outcome" }),
      h("p", { class: `outcome ${detail.state}` },
        h("span", { class: `badge ${detail.state}`, text: detail.state }),
        ` ${ended}${why ? `: ${why}` : ""} · final`,
        detail.pr_url ? h("span", {}, " · ", externalLink(detail.pr_url, "pull request")) : null),
    );
  }
  const threads = detail.review_threads || [];
  if (!state && !threads.length) return parts;
  const summary = detail.review?.summary || "no review threads yet";
  const ready = detail.ready_for_review ? "ready for review" : "not ready for review";
  parts.push(
    h("h3", { text: "Review threads" }),
    h("p", { class: "ledger-head" }, state ? `${PR_WORDS[state]} · ` : "", `${summary} · ${ready}`),
  );
  if (threads.length) parts.push(h("ul", { class: "ledger" }, threads.map((t) => threadItem(t, detail.pr_url))));
  return parts;
}

function threadItem(thread, prUrl) {
  const where = thread.path ? `${thread.path}:${thread.line ?? ""}` : "the review";
  const words = THREAD_WORDS[thread.state] || thread.state;
  let outcome = null;
  if (thread.state === "addressed" && thread.commit) {
    outcome = h("span", {}, " in ", commitLink(prUrl, thread.commit));
  } else if (thread.reason) {
    const label = thread.state === "needs_operator" ? "question: " : "reason: ";
    outcome = h("div", { class: "thread-reason", text: label + thread.reason });
  }
  return h(
    "li",
    { class: `thread ${thread.state}`, "data-thread": thread.root_id },
    h("span", { class: `thread-state ${thread.state}`, text: words }),
    " ",
    thread.url ? externalLink(thread.url, where) : h("span", { text: where }),
    h("span", { class: "thread-author", text: ` @${thread.author}` }),
    outcome,
    thread.excerpt ? h("q", { class: "thread-excerpt", text: thread.excerpt }) : null,
  );
}

// A commit on the pull request's repository: …/owner/name/pull/N -> …/owner/name/commit/SHA.
export function commitLink(prUrl, sha) {
  const short = sha.slice(0, 7);
  const repo = prUrl ? String(prUrl).replace(/\/pull\/\d+\/?$/, "") : "";
  if (!repo || repo === prUrl) return h("code", { text: short });
  return h("a", { href: `${repo}/commit/${sha}`, target: "_blank", rel: "noopener noreferrer" }, h("code", { text: short }));
}
