// The sessions sidebar: newest activity first, grouped Today / Yesterday / Earlier, a dot on
// sessions with unseen task results (kept on the server: `unseen` in the list, so it
// survives a reload), each titled by its `label` (the subject, not "file an issue for the…"),
// and a delete button on each. An empty chat other than the current one is not listed: the
// next "New chat" reuses it instead of another one piling up.
import { h, clear } from "./dom.js";

export function isEmptyChat(s) {
  return s.kind === "chat" && !s.turns && !s.title && !s.pending && !s.decision && !s.focus;
}

export function renderSidebar(list, all, { currentId, unseen, onOpen, onDelete }) {
  // The list is redrawn whole (a turn's end, a `session` event, a delete): the session that
  // had the focus keeps it, or a keyboard user would be thrown back to the page's start.
  const focused = list.contains(document.activeElement) ? document.activeElement.closest(".session")?.dataset.session : null;
  clear(list);
  fill(list, all, { currentId, unseen, onOpen, onDelete });
  if (focused) list.querySelector(`.session[data-session="${CSS.escape(focused)}"] .session-open`)?.focus();
}

function fill(list, all, { currentId, unseen, onOpen, onDelete }) {
  const sessions = all.filter((s) => s.id === currentId || !isEmptyChat(s));
  if (!sessions.length) {
    list.append(h("p", { class: "empty", text: "No sessions yet: ask anything about your repositories." }));
    return;
  }
  for (const [name, group] of byDay(sessions)) {
    list.append(
      h("h2", { class: "group", text: name }),
      h("ul", { class: "sessions" }, group.map((s) => item(s, s.id === currentId, Boolean(s.unseen) || unseen.has(s.id), onOpen, onDelete))),
    );
  }
}

function byDay(sessions) {
  const groups = new Map();
  const today = new Date().toDateString();
  const yesterday = new Date(Date.now() - 86400000).toDateString();
  for (const s of sessions) {
    const day = new Date(s.last_activity_at).toDateString();
    const name = day === today ? "Today" : day === yesterday ? "Yesterday" : "Earlier";
    if (!groups.has(name)) groups.set(name, []);
    groups.get(name).push(s);
  }
  return groups;
}

function item(s, current, unseen, onOpen, onDelete) {
  const title = s.label || s.title || "New chat";
  return h(
    "li",
    { class: current ? "session current" : "session", "data-session": s.id },
    h(
      "button",
      {
        class: "session-open",
        title, // the whole title when pointed at: the list cuts a long one with an ellipsis
        "aria-current": current ? "true" : null,
        "aria-keyshortcuts": "Delete",
        onclick: () => onOpen(s.id),
        onkeydown: (ev) => {
          if (ev.key === "Delete") onDelete(s.id, title);
        },
      },
      unseen ? h("span", { class: "dot", "aria-label": "new task result" }) : null,
      h("span", { class: "session-title", text: title }),
    ),
    // One Tab stop per session: Delete on the session deletes it; the ✕ is for the mouse.
    h("button", {
      class: "session-delete icon",
      tabindex: "-1",
      "aria-label": `Delete chat ${title}`,
      title: "Delete chat",
      text: "✕",
      onclick: () => onDelete(s.id, title),
    }),
  );
}
