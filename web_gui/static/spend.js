// The Dashboard's spend chart (issue 34): each repository's tokens per UTC day for the last
// 14 days as a row of bars, with the totals in words (the bars' heights are not the only
// way to read it). Fetched again when the tasks' reported tokens change (the Board hears of
// every change), else at most every 10 s however often the Dashboard repaints.
import { api } from "./api.js";
import { h, clear, dollars } from "./dom.js";

const DAYS = 14;
const REFRESH_MS = 10_000;
const SVG = "http://www.w3.org/2000/svg";
let last = { at: 0, key: null, data: null, pending: null };

async function load(key) {
  if (last.data && last.key === key && Date.now() - last.at < REFRESH_MS) return last.data;
  if (!last.pending) {
    last.pending = api.get(`/api/operator/spend?days=${DAYS}`).then(
      (data) => { last = { at: Date.now(), key, data, pending: null }; return data; },
      () => { last.pending = null; return last.data; },
    );
  }
  return last.pending;
}

function days() {
  const today = new Date();
  return Array.from({ length: DAYS }, (_, i) => {
    const d = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - (DAYS - 1 - i)));
    return d.toISOString().slice(0, 10);
  });
}

function bars(perDay, max) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${DAYS * 8} 24`);
  svg.setAttribute("class", "spend-bars");
  svg.setAttribute("aria-hidden", "true");
  perDay.forEach((value, i) => {
    const height = max ? Math.max(value ? 1 : 0, Math.round((value / max) * 24)) : 0;
    const bar = document.createElementNS(SVG, "rect");
    for (const [k, v] of Object.entries({ x: i * 8 + 1, y: 24 - height, width: 6, height })) bar.setAttribute(k, String(v));
    svg.append(bar);
  });
  return svg;
}

export async function renderSpend(list, key) {
  const data = await load(key);
  if (!data) return;
  const byRepo = new Map();
  for (const row of data.spend) {
    if (!byRepo.has(row.repo)) byRepo.set(row.repo, new Map());
    byRepo.get(row.repo).set(row.day, row);
  }
  clear(list);
  if (!byRepo.size) list.append(h("li", { class: "empty", text: "Nothing spent in the last 14 days." }));
  const span = days();
  for (const [repo, perDay] of byRepo) {
    const tokens = span.map((d) => perDay.get(d)?.tokens ?? 0);
    const usd = span.reduce((sum, d) => sum + (perDay.get(d)?.usd ?? 0), 0);
    const total = tokens.reduce((a, b) => a + b, 0);
    const cost = usd ? dollars(usd) : "cost unknown";
    list.append(
      h("li", { class: "row spend", "data-repo": repo },
        h("span", { class: "spend-repo", text: repo }),
        bars(tokens, Math.max(...tokens)),
        h("span", { class: "spend-total", text: `${total.toLocaleString("en")} tokens · ${cost}` })),
    );
  }
}
