// The Board: task cards by state, updated live; the run modal (events, why it waits, PR,
// the review thread ledger, CI fix runs, private log, Terminate, Discuss).
import { api } from "./api.js";
import { $, h, clear, age, dollars, externalLink, loadFailed } from "./dom.js";
import { confirmAction } from "./confirm.js";
import { notify } from "./notify.js";
import { FINAL, cardPull, modalPull, withLedger } from "./pull.js";
import { cardNow, modalCi } from "./loop_news.js";

export const STATES = [
  ["queued", "Queued"],
  ["running", "Running"],
  ["waiting_for_info", "Waiting for info"],
  ["delivered", "Delivered"],
  ["failed", "Failed"],
  ["terminated", "Terminated"],
  ["merged", "Merged"],
  ["closed", "Closed"],
  ["archived", "Archived"],
];
const LIVE = new Set(["queued", "running", "waiting_for_info"]);
export const RUNNING = new Set(["queued", "running"]);

export class Board {
  constructor(app) {
    this.app = app;
    this.tasks = new Map();
    this.modalTask = null;
    this.logAvailable = true;
    this.modal = $("#run-modal");
    this.modal.addEventListener("close", () => { this.modalTask = null; });
    $("#run-close").addEventListener("click", () => this.modal.close());
  }

  async load() {
    let live, archived;
    try {
      [live, archived] = await Promise.all([
        api.get("/api/operator/board?limit=1000"),
        api.get("/api/operator/board?archived=true&limit=1000"),
      ]);
    } catch (err) {
      // Never loaded: the Board and the Dashboard say so in place (a blank screen, or "No
      // tasks yet", would say nothing or something untrue). Loaded once, a refresh that
      // fails keeps the cards shown; its caller says what failed.
      if (!this.loaded) this.renderFailed(err);
      throw err;
    }
    this.loaded = true;
    const before = this.tasks;
    this.tasks = new Map();
    for (const t of [...live.tasks, ...archived.tasks]) {
      // A review pickup's or fix run's line lasts while the run does (as in apply()).
      const now = before.get(t.id)?.now;
      const same = before.get(t.id)?.state === t.state;
      this.tasks.set(t.id, now && (same || RUNNING.has(t.state)) ? { ...t, now } : t);
    }
    this.render();
    this.app.dashboard.render(this.list());
  }

  renderFailed(err) {
    const retry = () => this.load().catch((e) => notify(`The Board could not load: ${e.message}`, { level: "error" }));
    clear($("#board-columns")).append(loadFailed(`The Board could not load: ${err.message}.`, retry));
    this.app.dashboard.renderFailed(`The Dashboard could not load: ${err.message}.`, retry);
  }

  list() {
    return [...this.tasks.values()].sort((a, b) => (b.updated_at || "").localeCompare(a.updated_at || ""));
  }

  // A `task` event: the task's card as the Board lists it (bot/contracts/events.py,
  // TaskFrame): its state, the pull request loop (pr_state, review, ready_for_review, as a
  // `ledger` event has them) and, while it waits, its question. Nothing is read again.
  apply(event) {
    const known = this.tasks.get(event.task_id) || { id: event.task_id, archived: false };
    let task = {
      ...known,
      id: event.task_id,
      repo: event.repo ?? known.repo,
      issue: event.issue ?? known.issue,
      title: event.title ?? known.title,
      state: event.state ?? known.state,
      pr_url: event.pr_url ?? known.pr_url,
      cost_usd: event.cost_usd ?? known.cost_usd,
      tokens: event.tokens ?? known.tokens,
      reason: event.reason ?? known.reason,
      updated_at: event.updated_at ?? known.updated_at,
      // A question belongs to the wait: a task that moved on asks nothing (null).
      question: "question" in event ? event.question : known.question,
    };
    if ("pr_state" in event) task = withLedger(task, event);
    if (event.state === "archived") task.archived = true;
    // A review pickup's or fix run's line lasts while the run does.
    if (task.state !== known.state && !RUNNING.has(task.state)) task.now = null;
    this.put(task);
  }

  // A `ledger` event: a review thread was recorded or settled (pull.js reads its fields).
  applyLedger(event) {
    const known = this.tasks.get(event.task_id);
    if (!known) return; // not on this Board yet: the next load brings it whole
    this.put(withLedger(known, event));
  }

  // A `review` or `fix_run` event: what the task's next run does, in words (loop_news.js).
  applyNews(taskId, words) {
    const known = this.tasks.get(taskId);
    if (known) this.put({ ...known, now: words });
    else if (this.modalTask === taskId) this.openModal(taskId);
  }

  put(task) {
    this.tasks.set(task.id, task);
    this.render();
    this.app.dashboard.render(this.list());
    if (this.modalTask === task.id) this.openModal(task.id);
  }

  findIssue(issue) {
    return this.list().find((t) => t.issue === issue) || null;
  }

  openIssue(issue) {
    const task = this.findIssue(issue);
    if (task) this.openModal(task.id);
  }

  column(task) {
    return task.archived ? "archived" : task.state;
  }

  render() {
    const root = clear($("#board-columns"));
    const tasks = this.list();
    if (!tasks.length) {
      root.append(h("p", { class: "empty", text: "No tasks yet. Filed issues with the pickup label appear here." }));
    }
    for (const [state, label] of STATES) {
      const cards = tasks.filter((t) => this.column(t) === state);
      root.append(
        h(
          "section",
          { class: `column state-${state}`, "aria-label": `${label} (${cards.length})`, "data-state": state },
          h("h2", {}, label, h("span", { class: "count", text: ` ${cards.length}` })),
          h("ul", { class: "cards" }, cards.map((t) => this.card(t))),
        ),
      );
    }
    this.app.chat?.relinkCitations();
  }

  card(task) {
    const title = task.title || "(untitled)";
    const finished = !LIVE.has(task.state);
    return h(
      "li",
      // Merged and closed are final: the card says so and reads as done.
      { class: FINAL.has(task.state) ? "card final" : "card", "data-task": task.id, "data-issue": task.issue ?? "" },
      h(
        "button",
        { class: "card-open", onclick: () => this.openModal(task.id), title: "Open the run" },
        h("span", { class: "card-issue", text: task.issue ? `#${task.issue}` : `task ${task.id}` }),
        h("span", { class: "card-title", text: title }),
      ),
      h("div", { class: "card-meta" },
        h("span", { class: `badge ${task.state}`, text: task.state.replaceAll("_", " ") }),
        age(task.updated_at),
        ...spend(task),
        task.pr_url && !task.pr_state && !FINAL.has(task.state) ? externalLink(task.pr_url, "PR") : null,
      ),
      cardPull(task),
      cardNow(task),
      h("div", { class: "card-actions" },
        task.issue ? h("button", { class: "discuss", text: "Discuss", onclick: () => this.app.chat.discuss(task.issue), "aria-label": `Discuss #${task.issue}` }) : null,
        finished && !task.archived ? h("button", { class: "archive", text: "Archive", onclick: () => this.archive(task.id), "aria-label": `Archive #${task.issue}` }) : null,
      ),
    );
  }

  async archive(id) {
    try {
      const task = await api.post(`/api/operator/tasks/${id}/archive`);
      this.tasks.set(task.id, { ...this.tasks.get(task.id), ...task });
      this.render();
      this.app.dashboard.render(this.list());
      notify(`Archived #${task.issue}: it is in the Archived column.`, {
        group: `task:${task.id}`,
        action: { label: "Undo", run: () => this.unarchive(task.id) },
      });
    } catch (err) {
      notify(`Archive failed: ${err.message}`, { level: "error" });
    }
  }

  // Archive's Undo: the task goes back to its column (POST .../unarchive is idempotent).
  async unarchive(id) {
    try {
      const task = await api.post(`/api/operator/tasks/${id}/unarchive`);
      this.tasks.set(task.id, { ...this.tasks.get(task.id), ...task });
      this.render();
      this.app.dashboard.render(this.list());
      notify(`#${task.issue} is back on the Board.`, { group: `task:${task.id}` });
      $("#board-columns").querySelector(`.card[data-task='${task.id}'] .card-open`)?.focus();
    } catch (err) {
      notify(`Undo failed: ${err.message}`, { level: "error" });
    }
  }

  async terminate(id) {
    const sure = await confirmAction("Terminate this run? The coding agent is stopped and the task ends.", {
      confirm: "Terminate",
      cancel: "Keep running",
    });
    if (!sure) return;
    try {
      const task = await api.post(`/api/operator/tasks/${id}/terminate`);
      this.tasks.set(task.id, { ...this.tasks.get(task.id), ...task });
      this.render();
      this.openModal(id);
    } catch (err) {
      notify(`Terminate failed: ${err.message}`, { level: "error" });
    }
  }

  async openModal(id) {
    let detail;
    try {
      detail = await api.get(`/api/operator/tasks/${id}`);
    } catch (err) {
      notify(`Could not load the run: ${err.message}`, { level: "error" });
      return;
    }
    this.modalTask = id;
    $("#run-title").textContent = `${detail.issue ? `#${detail.issue} ` : ""}${detail.title || ""}`;
    const body = clear($("#run-body"));
    body.append(
      h("p", {}, h("span", { class: `badge ${detail.state}`, text: detail.state.replaceAll("_", " ") }),
        detail.pr_url ? h("span", {}, " · ", externalLink(detail.pr_url, "pull request")) : null,
        detail.usage?.cost_usd ? ` · ${dollars(detail.usage.cost_usd)}` : null,
        detail.usage?.tokens ? ` · ${detail.usage.tokens.toLocaleString("en")} tokens` : null),
    );
    if (detail.held) body.append(h("h3", { text: "Held" }), h("p", { class: "why held", text: detail.held }));
    if (detail.estimate) body.append(h("p", { class: "estimate", text: detail.estimate.text }));
    const why = waitingReason(detail);
    if (why) body.append(h("h3", { text: "Why it waits" }), h("p", { class: "why", text: why }));
    // tabindex: a scrollable region must be reachable by keyboard (axe: scrollable-region-focusable).
    if (detail.last_error) body.append(h("h3", { text: "Last error" }), h("pre", { class: "log", tabindex: 0, text: detail.last_error }));
    body.append(...modalPull(detail), ...modalCi(detail));
    if (detail.blocked?.length) {
      // Hosts the run's egress proxy refused (docs/lifecycle.md, "Egress"); text only: the runtime chose them.
      body.append(h("h3", { text: "Blocked requests" }), h("ul", { class: "blocked" }, detail.blocked.map(blockedItem)));
    }
    body.append(h("h3", { text: "Events" }), h("ol", { class: "events" }, (detail.events || []).map(eventItem)));
    const logSlot = h("div", { class: "log-slot" });
    body.append(logSlot);
    this.loadLog(id, logSlot);
    const actions = clear($("#run-actions"));
    if (LIVE.has(detail.state)) actions.append(h("button", { class: "danger", text: "Terminate", onclick: () => this.terminate(id) }));
    if (detail.issue) actions.append(h("button", { text: "Discuss", onclick: () => { this.modal.close(); this.app.chat.discuss(detail.issue); } }));
    if (!this.modal.open) {
      this.modal.showModal();
      $("#run-close").focus(); // never the destructive button: Enter must not terminate
    }
  }

  async loadLog(id, slot) {
    if (!this.logAvailable) return;
    try {
      const log = await api.get(`/api/operator/tasks/${id}/log`);
      const runs = log.runs ?? [];
      if (!runs.length) return;
      // GET /api/operator/tasks/{id}/log: each run's redacted log, newest last (docs/api.md).
      const text = runs
        .map((run) => `attempt ${run.attempt} · ${run.status} · ${run.at}\n${run.text}`)
        .join("\n\n");
      slot.append(h("h3", { text: "Private log" }), h("pre", { class: "log", tabindex: 0, text }));
    } catch (err) {
      if (err.status === 404 && !err.body?.detail) this.logAvailable = err.body?.error !== "Not Found";
    }
  }
}

// What the coding runtime spent: tokens and USD as it reported them; tokens without a cost
// read "cost unknown", never $0 (issue 34).
function spend(task) {
  if (!task.cost_usd && !task.tokens) return [];
  const cost = task.cost_usd ? dollars(task.cost_usd) : "cost unknown";
  return [
    task.tokens ? h("span", { class: "tokens", text: `${task.tokens.toLocaleString("en")} tokens`, title: "Tokens the coding runtime reported" }) : null,
    h("span", { class: "cost", text: cost, title: "What the coding runtime spent on it" }),
  ];
}

function waitingReason(detail) {
  if (detail.state !== "waiting_for_info") return detail.reason || "";
  return detail.question || detail.reason || detail.last_event?.detail || "waiting for the operator's Decision";
}

function eventItem(ev) {
  const change = ev.from || ev.to ? ` ${ev.from || "·"} → ${ev.to || "·"}` : "";
  return h(
    "li",
    {},
    h("time", { datetime: ev.at, text: new Date(ev.at).toLocaleString() }),
    h("span", { class: "event-kind", text: ` ${ev.kind}${change}` }),
    ev.detail ? h("div", { class: "event-detail", text: ev.detail }) : null,
  );
}

function blockedItem(entry) {
  const times = entry.count === 1 ? "1 request" : `${entry.count} requests`;
  return h(
    "li",
    {},
    h("code", { text: `${entry.host}:${entry.port}` }),
    ` · ${times} · attempt ${entry.attempt}`,
    entry.reason ? h("div", { class: "event-detail", text: entry.reason }) : null,
  );
}
