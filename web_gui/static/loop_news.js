// Review pickups and CI fix runs (the `review` and `fix_run` events, docs/api.md) in words:
// the notification, the Board card's line about what the run is doing now, and the run
// modal's CI history (the task JSON's `ci`). Check names and reasons go in as text nodes.
import { h } from "./dom.js";
import { commitLink } from "./pull.js";

// How a head commit's failure ended, in words (the API's `outcome` is a machine word).
const OUTCOME_WORDS = {
  queued: "fix run under way",
  pushed: "fixed in",
  unchanged: "the fix run changed nothing: a person is asked",
  superseded: "the branch moved on before the fix run",
  ended: "the fix run ended without a push",
  stopped: "no fix run: a person is asked",
  interrupted: "the pull request was merged or closed under the fix run",
};

export function reviewWords(event) {
  const count = (event.threads || []).length;
  return `answering ${count} review thread${count === 1 ? "" : "s"}`;
}

export function fixRunWords(event) {
  const bound = event.of ? ` of ${event.of}` : "";
  return `CI failed on ${String(event.head_sha || "").slice(0, 7)}, fix run ${event.run}${bound}`;
}

// The card's "now" line: set by a review pickup or a fix run, gone once the run has ended.
export function cardNow(task) {
  return task.now ? h("div", { class: "card-now", text: task.now }) : null;
}

// The run modal's part: each head commit CI failed on, what it started and how it ended.
export function modalCi(detail) {
  const fixes = detail.ci || [];
  if (!fixes.length) return [];
  return [h("h3", { text: "CI fix runs" }), h("ul", { class: "ci-fixes" }, fixes.map((f) => fixItem(f, detail.pr_url)))];
}

function fixItem(fix, prUrl) {
  const run = fix.run ? `fix run ${fix.run}${fix.of ? ` of ${fix.of}` : ""}` : "no fix run";
  const asked = fix.outcome === "stopped" || fix.outcome === "unchanged";
  return h(
    "li",
    { class: `ci-fix ${fix.outcome}`, "data-sha": fix.head_sha },
    "CI failed on ",
    commitLink(prUrl, fix.head_sha),
    fix.checks.length ? h("span", { class: "ci-checks", text: ` (${fix.checks.join(", ")})` }) : null,
    h("span", { class: "ci-run", text: ` · ${run} · ` }),
    h("span", { class: `ci-outcome ${fix.outcome}`, text: OUTCOME_WORDS[fix.outcome] || fix.outcome }),
    fix.outcome === "pushed" && fix.result_sha ? h("span", {}, " ", commitLink(prUrl, fix.result_sha)) : null,
    asked && fix.reason ? h("div", { class: "thread-reason", text: fix.reason }) : null,
  );
}
