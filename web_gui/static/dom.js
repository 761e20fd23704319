// DOM helpers. Text always goes in as text nodes: nothing here parses HTML, so untrusted
// strings (titles, previews, logs) can never become markup. Markdown goes through markdown.js.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "href") el.setAttribute("href", safeUrl(value));
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Only http(s) links leave the page; anything else (javascript:, data:) becomes inert.
export function safeUrl(value) {
  try {
    const url = new URL(String(value), window.location.href);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : "#";
  } catch {
    return "#";
  }
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

export function show(el, visible) {
  el.hidden = !visible;
}

// What a run cost, as people read money: cents, and a sub-cent spend not shown as $0.00
// (the Board's cards and the Dashboard's spend chart read the same task alike).
export function dollars(usd) {
  const value = Number(usd);
  return value < 0.01 ? "<$0.01" : `$${value.toFixed(2)}`;
}

export function ago(iso) {
  if (!iso) return "";
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return "just now";
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

// "3 min ago" that stays true on a page left open: `refreshAges` (app.js, each minute)
// rewrites it from the time it names; the exact time shows on hover.
export function age(iso) {
  return h("span", { class: "age", "data-at": iso || null, title: iso ? new Date(iso).toLocaleString() : null, text: ago(iso) });
}

export function refreshAges(root = document) {
  for (const el of root.querySelectorAll(".age[data-at]")) {
    const text = ago(el.dataset.at);
    if (el.textContent !== text) el.textContent = text;
  }
}

export function externalLink(url, text) {
  return h("a", { href: url, target: "_blank", rel: "noopener noreferrer" }, text);
}

// A load that failed, said in place: what failed and a way to try again.
export function loadFailed(text, retry) {
  return h("p", { class: "load-failed" }, text, " ", h("button", { type: "button", text: "Try again", onclick: retry }));
}
