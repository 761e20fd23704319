// A confirmation in the page's own dialog (not window.confirm): it opens with focus on the
// safe choice, so Enter, Enter never ends anything by accident; Esc cancels.
import { $ } from "./dom.js";

export function confirmAction(text, { confirm = "OK", cancel = "Cancel" } = {}) {
  const dialog = $("#confirm-dialog");
  $("#confirm-text").textContent = text;
  $("#confirm-ok").textContent = confirm;
  $("#confirm-cancel").textContent = cancel;
  dialog.returnValue = "cancel";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.showModal();
    $("#confirm-cancel").focus();
  });
}
