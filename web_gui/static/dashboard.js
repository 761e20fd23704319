// The Dashboard: how many pull requests are open, merged and closed; delivered PRs (with
// their review ledger), questions waiting, failures. A delivered row sets the
// focus in Chat (the contract: "Focus comes from a Dashboard delivered row").
import { $, h, clear, age, externalLink, loadFailed } from "./dom.js";
import { renderSpend } from "./spend.js";
import { FINAL, isReady } from "./pull.js";

const PULLS = ["delivered", "merged", "closed"];

export class Dashboard {
  constructor(app) {
    this.app = app;
  }

  render(tasks) {
    const live = tasks.filter((t) => !t.archived);
    this.counts();
    this.fill("#dash-delivered", live.filter((t) => PULLS.includes(t.state)), "No pull requests delivered yet.", (t) =>
      h("li", { class: FINAL.has(t.state) ? "row final" : "row" },
        h("button", { class: "row-focus", text: `#${t.issue} ${t.title || ""}`, title: "Focus this issue in Chat", onclick: () => this.focus(t.issue) }),
        t.pr_url ? externalLink(t.pr_url, "pull request") : null,
        FINAL.has(t.state) ? h("span", { class: `badge ${t.state}`, text: t.state }) : null,
        !FINAL.has(t.state) && t.review?.summary ? h("span", { class: "ledger-summary", text: t.review.summary }) : null,
        isReady(t) ? h("span", { class: "ready", text: "ready for review" }) : null,
        age(t.updated_at)));
    this.fill("#dash-waiting", live.filter((t) => t.state === "waiting_for_info"), "No questions waiting for you.", (t) => {
      const asks = this.asks(t); // what it asks, so the operator can answer without opening the run
      return h("li", { class: "row" },
        h("span", { text: `#${t.issue} ${t.title || ""}` }),
        asks ? h("q", { class: "why", text: asks }) : null,
        h("button", { text: "Discuss", "aria-label": `Discuss #${t.issue}`, onclick: () => this.app.chat.discuss(t.issue) }),
        age(t.updated_at));
    });
    this.fill("#dash-failed", live.filter((t) => t.state === "failed"), "No failures.", (t) =>
      h("li", { class: "row" },
        h("button", { class: "row-open", text: `#${t.issue} ${t.title || ""}`, title: "Open the run", onclick: () => this.app.board.openModal(t.id) }),
        age(t.updated_at)));
    renderSpend($("#dash-spend"), tasks.reduce((sum, t) => sum + (t.tokens || 0), 0));
  }

  // The Board's tasks did not load: nothing here is known, and the page says so once.
  renderFailed(text, retry) {
    for (const list of ["#dash-delivered", "#dash-waiting", "#dash-failed"]) clear($(list));
    clear($("#dash-outcomes")).append(h("li", {}, loadFailed(text, retry)));
  }

  // How the delivered pull requests stand: open (delivered), merged, closed; archived
  // tasks count too (archiving hides a card, it does not undo a merge).
  counts() {
    const all = [...this.app.board.tasks.values()];
    const count = (state) => all.filter((t) => t.state === state).length;
    const items = [["delivered", "open"], ["merged", "merged"], ["closed", "closed"]].map(([state, words]) =>
      h("li", { class: `outcome-count ${state}`, "data-state": state },
        h("strong", { text: String(count(state)) }), ` ${words}`));
    clear($("#dash-outcomes")).append(...items);
  }

  // What a waiting task asks: the Board's list and the `task` event carry its `question`
  // (null unless it waits), so the row needs no read of the task; the last event's words
  // stand in for a wait with no question recorded.
  asks(task) {
    return task.question || task.reason || task.last_event?.detail || "";
  }

  fill(selector, tasks, empty, row) {
    const list = clear($(selector));
    if (!tasks.length) list.append(h("li", { class: "empty", text: empty }));
    for (const t of tasks) list.append(row(t));
  }

  focus(issue) {
    this.app.chat.setFocus(issue);
    this.app.show("chat");
    $("#message").focus();
  }
}
