// Notifications: a line under the header (never over a control), once per `key` (a
// reconnecting stream or a poll seeing the same event again never shows it twice), and one
// per task (`group`): a later event about the task replaces the earlier notification, and
// a second telling of the same event (`event`: the task's result after its state change, or
// the other way round) is merged in place, the richer text (`upgrade`) winning.
import { $, h, externalLink } from "./dom.js";

const seen = new Set();
const MAX_SHOWN = 4; // the oldest goes first; each keeps its full text while shown

export function notify(
  text,
  { level = "info", link = null, action = null, key = null, group = null, event = null, upgrade = false, os = false } = {},
) {
  if (key !== null) {
    if (seen.has(key)) return false;
    seen.add(key);
  }
  const region = $("#toasts");
  const earlier = group ? [...region.children].find((t) => t.dataset.group === group) : null;
  if (earlier && event !== null && earlier.dataset.event === event) {
    if (upgrade) fill(earlier, text, level, link, action);
    return false;
  }
  const toast = h("div", { "data-group": group, "data-event": event });
  fill(toast, text, level, link, action);
  if (earlier) earlier.replaceWith(toast);
  else region.append(toast);
  while (region.children.length > MAX_SHOWN) region.firstElementChild.remove();
  if (os) osNotify(text, group, action);
  return true;
}

// News about work (`os`) also reaches the desktop while the tab is hidden, once the
// operator allowed it (the sidebar's "Desktop alerts" asks; nothing asks by itself).
function osNotify(text, group, action) {
  if (!document.hidden || !("Notification" in window) || Notification.permission !== "granted") return;
  try {
    const shown = new Notification("Steelframe", { body: text, tag: group || undefined });
    shown.onclick = () => {
      window.focus();
      action?.run();
      shown.close();
    };
  } catch {
    /* some browsers (Android Chrome) allow only service-worker notifications */
  }
}

export function offerDesktopAlerts(button) {
  const ask = "Notification" in window && Notification.permission === "default";
  button.hidden = !ask;
  button.onclick = () => Notification.requestPermission().then(() => offerDesktopAlerts(button));
}

function fill(toast, text, level, link, action) {
  toast.className = `toast ${level}`;
  toast.setAttribute("role", level === "error" ? "alert" : "status");
  const parts = [
    h("span", { class: "toast-text", text, title: text }),
    link ? externalLink(link, "open") : null,
    action ? h("button", { class: "link", text: action.label, onclick: () => { toast.remove(); action.run(); } }) : null,
    h("button", { class: "icon", "aria-label": "Dismiss notification", text: "✕", onclick: () => toast.remove() }),
  ];
  toast.replaceChildren(...parts.filter(Boolean));
  clearTimeout(Number(toast.dataset.timer));
  // Fades after a while (errors later), never while pointed at or focused.
  toast.dataset.timer = String(setTimeout(() => expire(toast), level === "error" ? 20000 : 10000));
}

function expire(toast) {
  if (toast.matches(":hover, :focus-within")) {
    toast.dataset.timer = String(setTimeout(() => expire(toast), 3000));
    return;
  }
  toast.remove();
}
