// What Discuss opens with for a task that waits (issue 34): its proposed plan, and the past
// Decisions that answered a similar question, each cited with its issue and date. Text only:
// the plan is the agent's words and the Decisions are quoted, never rendered as markup.
import { h } from "./dom.js";

export function offerPanel(detail) {
  const plan = detail.plan?.status === "proposed" ? detail.plan : null;
  const offered = detail.offered ?? [];
  if (!plan && !offered.length) return null;
  const panel = h("section", { class: "offer", "aria-label": "Waiting on the operator" });
  if (plan) {
    panel.append(
      h("h3", { text: `Proposed plan for #${detail.issue}` }),
      h("pre", { class: "plan", tabindex: 0, text: plan.text }),
    );
    if (detail.estimate) panel.append(h("p", { class: "estimate", text: detail.estimate.text }));
  }
  if (offered.length) {
    panel.append(
      h("h3", { text: "Earlier Decisions on similar questions" }),
      h("ul", { class: "offered" }, offered.map(offeredItem)),
    );
  }
  return panel;
}

function offeredItem(offer) {
  const day = new Date(offer.at).toISOString().slice(0, 10);
  return h(
    "li",
    { "data-issue": offer.issue },
    h("span", { class: "cite", text: `#${offer.issue} (${day})` }),
    h("q", { class: "offered-decision", text: offer.decision }),
    h("div", { class: "offered-question", text: `answered: ${offer.question}` }),
  );
}
