// The Dashboard: delivered PRs, questions waiting, failures. A delivered row sets the
// focus in Chat (the contract: "Focus comes from a Dashboard delivered row").
import { $, h, clear, ago, externalLink } from "./dom.js";
import { renderSpend } from "./spend.js";

export class Dashboard {
  constructor(app) {
    this.app = app;
  }

  render(tasks) {
    const live = tasks.filter((t) => !t.archived);
    this.fill("#dash-delivered", live.filter((t) => ["delivered", "merged"].includes(t.state)), "No pull requests delivered yet.", (t) =>
      h("li", { class: "row" },
        h("button", { class: "row-focus", text: `#${t.issue} ${t.title || ""}`, title: "Focus this issue in Chat", onclick: () => this.focus(t.issue) }),
        t.pr_url ? externalLink(t.pr_url, "pull request") : null,
        t.state === "merged" ? h("span", { class: "badge merged", text: "merged" }) : null,
        h("span", { class: "age", text: ago(t.updated_at) })));
    this.fill("#dash-waiting", live.filter((t) => t.state === "waiting_for_info"), "No questions waiting for you.", (t) =>
      h("li", { class: "row" },
        h("span", { text: `#${t.issue} ${t.title || ""}` }),
        // What it asks, so the operator can answer without opening the run.
        t.reason || t.last_event?.detail ? h("q", { class: "why", text: t.reason || t.last_event.detail }) : null,
        h("button", { text: "Discuss", "aria-label": `Discuss #${t.issue}`, onclick: () => this.app.chat.discuss(t.issue) }),
        h("span", { class: "age", text: ago(t.updated_at) })));
    this.fill("#dash-failed", live.filter((t) => t.state === "failed"), "No failures.", (t) =>
      h("li", { class: "row" },
        h("button", { class: "row-open", text: `#${t.issue} ${t.title || ""}`, title: "Open the run", onclick: () => this.app.board.openModal(t.id) }),
        h("span", { class: "age", text: ago(t.updated_at) })));
    renderSpend($("#dash-spend"), tasks.reduce((sum, t) => sum + (t.tokens || 0), 0));
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
