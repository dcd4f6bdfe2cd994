// The Account section: the owner changes the password (POST /api/account/password/).
// Nothing is kept in the page: the fields are emptied once the server has answered.
import { call as api, say } from "./api.js";

export function accountSection(root = document.getElementById("account")) {
  const form = root.querySelector("#password-form");
  const current = root.querySelector("#password-current");
  const fresh = root.querySelector("#password-new");
  const again = root.querySelector("#password-again");
  const save = root.querySelector("#password-save");
  const message = root.querySelector("#password-message");

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!current.value || !fresh.value) {
      say(message, "Enter the current password and the new one.", "error");
      return;
    }
    if (fresh.value !== again.value) {
      say(message, "The two new passwords differ.", "error");
      again.focus();
      return;
    }
    save.disabled = true;
    say(message, "Changing…");
    try {
      await api("POST", "/api/account/password/", { current_password: current.value, new_password: fresh.value });
      form.reset();
      say(message, "Password changed. Every other browser and device is signed out.", "ok");
    } catch (error) {
      say(message, error.message, "error");
      (error.code === "wrong_password" ? current : fresh).focus();
    } finally {
      save.disabled = false;
    }
  });
}
