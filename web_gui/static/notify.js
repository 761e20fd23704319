// Notifications: a toast where the operator is, once per key (a reconnecting stream or a
// poll that sees the same result again never shows it twice).
import { $, h, externalLink } from "./dom.js";

const seen = new Set();

export function notify(text, { level = "info", link = null, action = null, key = null } = {}) {
  if (key !== null) {
    if (seen.has(key)) return false;
    seen.add(key);
  }
  const region = $("#toasts");
  const toast = h(
    "div",
    { class: `toast ${level}`, role: level === "error" ? "alert" : "status" },
    h("span", { class: "toast-text", text }),
    link ? externalLink(link, "open") : null,
    action ? h("button", { class: "link", text: action.label, onclick: () => { toast.remove(); action.run(); } }) : null,
    h("button", { class: "icon", "aria-label": "Dismiss notification", text: "✕", onclick: () => toast.remove() }),
  );
  region.append(toast);
  setTimeout(() => toast.remove(), level === "error" ? 12000 : 8000);
  return true;
}
