// The Nimbus account console: plain JavaScript, no build step, talking only to the API on the same
// origin (the CSP allows nothing else). Views are <template>s in index.html; this script picks one
// from location.pathname (/console/<view>), so every view has a real URL and the emailed links
// /console/verify?token=... and /console/recover?token=... land on their views. A signed-out tab
// opening a signed-in view (the new sign-in notice's /console/sessions) logs in first and then lands
// on it: the login page keeps it as /console/login?next=<view>.
"use strict";

(() => {
  const BASE = "/console";

  const {
    $, token, request, outcome, call, isChallenge, b64url, withIds, credentialJson, passkeyAssertion, webauthnError,
    say, fail, clearMessages, explain, waitFor, when, fromUnix, element, labelled, SCOPES, scopeNames, FACTOR_TYPES,
    confirmIdentity, reverified, devices, signedIn, showFieldError, clearFieldErrors, activityList,
  } = window.Nimbus; // console/common.js, shared with the staff console
  window.Nimbus.configure({
    base: BASE,
    // Logging in again comes back to the view the session ended on.
    onSessionEnd: (message) => navigate(loginFor(currentView()), { error: message }),
    hasPasskey: () => accountHasPasskey(),
  });

  const main = $("#main");

  // ----------------------------------------------------------------------------------- WebAuthn

  function creationOptions(setup) {
    return {
      rp: setup.rp,
      user: { ...setup.user, id: b64url.decode(setup.user.id) },
      challenge: b64url.decode(setup.challenge),
      pubKeyCredParams: setup.pubKeyCredParams,
      timeout: setup.timeout,
      excludeCredentials: withIds(setup.excludeCredentials),
      authenticatorSelection: setup.authenticatorSelection,
      attestation: setup.attestation,
      extensions: setup.extensions, // credProps: the browser says whether the key is discoverable
    };
  }

  // Whether the signed-in account has a passkey (a Promise of a boolean, null when not asked yet):
  // the reverification dialog offers "Use a passkey" only then. Forgotten at every view, so a
  // passkey added or removed elsewhere is seen; the factors view fills it from the list it shows.
  let passkeys = null;

  function accountHasPasskey() {
    if (!passkeys) {
      passkeys = call("GET", "/users/me/2fa?limit=50").then(
        (factors) => factors.items.some((factor) => factor.passkey),
        (error) => {
          passkeys = null;
          if (error && error.explained) throw error; // the session is dead: no dialog to open
          return false;
        },
      );
    }
    return passkeys;
  }

  // --------------------------------------------------------------------- status and rendering

  /** Show an account change's error in words (or nothing, if it was already explained). */
  function failChange(error, what) {
    if (error && error.explained) return;
    fail(explain(error, what));
  }

  // Errors said at the field they name as well as in the page's alert (the fields the forms send).
  const AT_FIELD = new Set(["INSECURE_PASSWORD_ERROR"]);

  /** Show an error; one of AT_FIELD also under the field its `fields` name in `form`, which takes
   * the focus (common.js's showFieldError). */
  function failAtField(form, error, what) {
    if (error && error.explained) return;
    if (error && AT_FIELD.has(error.code)) {
      fail(explain(error, what));
      showFieldError(form, error);
    } else {
      fail(what === undefined ? error : explain(error, what));
    }
  }

  async function copy(text, button) {
    try {
      await navigator.clipboard.writeText(text);
      say("Copied to the clipboard.");
    } catch {
      say("Select the text and copy it yourself: the browser refused clipboard access.");
    }
    button.focus();
  }

  // ------------------------------------------------------------------------------------ views

  async function loginView() {
    const form = $("#login-form");
    const rememberMe = () => form.elements.rememberMe.checked;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      // The browser's passkey offer would hold on to the authenticator the second factor may need.
      stopPasskeyAutofill();
      const username = form.elements.username.value.trim();
      // This browser's device token for the account, when an earlier sign-in here answered one.
      const device = devices.for(username);
      const body = { username, password: form.elements.password.value, rememberMe: rememberMe(), device };
      try {
        let reply = await request("POST", "/login", body, { auth: false });
        if (isChallenge(reply)) {
          // When `2fa` is present the challenge token alone names the user (CONTRACT section 9).
          reply = await confirmIdentity({
            heading: "Second factor",
            purpose: "Your account is protected by a second factor.",
            challenge: reply.body,
            send: (extra) => request("POST", "/login", { rememberMe: rememberMe(), device, ...extra }, { auth: false }),
          });
          if (!reply) {
            say("Login cancelled.");
            return offerPasskeyAutofill(rememberMe);
          }
        }
        await signedIn(outcome(reply), username);
        navigate(landing(), { status: "Logged in." });
      } catch (error) {
        fail(error);
        offerPasskeyAutofill(rememberMe);
      }
    });

    const button = $("#passkey-login");
    button.addEventListener("click", async () => {
      stopPasskeyAutofill(); // one WebAuthn request at a time: the modal one takes over
      clearMessages();
      button.disabled = true;
      try {
        const started = await call("POST", "/login/passkey", {}, { auth: false });
        const response = await passkeyAssertion(started.challenge);
        await passkeySignedIn(started.token, response, rememberMe);
      } catch (error) {
        failPasskey(error);
        offerPasskeyAutofill(rememberMe);
      } finally {
        button.disabled = false;
      }
    });
    offerPasskeyAutofill(rememberMe);
  }

  // --------------------------------------------------------------------- signing in with a passkey

  // The login page's pending conditional request (the passkeys offered in the username field's
  // autofill), so that it can be stopped: before the button's own request, and on leaving the view.
  let autofill = null;

  function stopPasskeyAutofill() {
    if (autofill) autofill.abort();
    autofill = null;
  }

  /** The second step of POST /login/passkey: the authenticator's answer for the challenge token; a
   * session on success (CONTRACT section 16). */
  async function passkeySignedIn(challengeToken, response, rememberMe) {
    const body = { token: challengeToken, response, rememberMe: rememberMe() };
    await signedIn(await call("POST", "/login/passkey", body, { auth: false }));
    navigate(landing(), { status: "Signed in with your passkey." });
  }

  /** A passkey sign-in's error in words: the API answers the same for an unknown, removed or wrong
   * passkey, so the words cover all three. */
  function failPasskey(error) {
    if (error && error.code === "INVALID_SECOND_FACTOR_RESPONSE_ERROR") {
      fail(
        "That passkey was not accepted: it may have been removed from its account, or the request took too long. " +
          "Try again, or log in with your password. (INVALID_SECOND_FACTOR_RESPONSE_ERROR)",
      );
    } else {
      fail(explain(error));
    }
  }

  // A lower bound on the wait before a fresh challenge, should this computer's clock run ahead of
  // the API's (the token's exp would then seem already past, and the page would ask in a loop).
  const RENEW_AT_LEAST_MS = 60_000;

  /**
   * Let the browser offer the passkeys it holds for this site in the username field's autofill
   * (`autocomplete="username webauthn"`, conditional mediation), where it can: a challenge from the
   * API, then a request that waits until the person picks a passkey there. It is asked again when
   * its challenge token expires. A failure to start says nothing (the button remains); a passkey
   * the API refuses is said as the button's would be, and the offer is not made again by itself (an
   * authenticator that answers without asking anyone would otherwise be refused in a loop).
   */
  async function offerPasskeyAutofill(rememberMe) {
    stopPasskeyAutofill();
    const controller = new AbortController();
    autofill = controller;
    const { signal } = controller;
    let started;
    let response;
    try {
      const able = window.PublicKeyCredential && PublicKeyCredential.isConditionalMediationAvailable;
      if (!able || !(await PublicKeyCredential.isConditionalMediationAvailable()) || signal.aborted) return;
      started = await call("POST", "/login/passkey", {}, { auth: false });
      if (signal.aborted) return;
      const wait = Math.max(started.exp * 1000 - Date.now(), RENEW_AT_LEAST_MS);
      const renew = setTimeout(() => autofill === controller && offerPasskeyAutofill(rememberMe), wait);
      try {
        response = await passkeyAssertion(started.challenge, { mediation: "conditional", signal });
      } finally {
        clearTimeout(renew);
      }
    } catch {
      return; // stopped (the view left, the button pressed, a new challenge), or not offered here
    }
    if (signal.aborted) return;
    autofill = null;
    try {
      await passkeySignedIn(started.token, response, rememberMe);
    } catch (error) {
      failPasskey(error);
    }
  }

  async function registerView() {
    const form = $("#register-form");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = Object.fromEntries(new FormData(form));
      try {
        clearFieldErrors(form);
        await signedIn(await call("POST", "/register", data, { auth: false }), data.username, data.email);
        navigate("/account", { status: `Account created. We sent a verification link to ${data.email}.` });
      } catch (error) {
        failAtField(form, error);
      }
    });
  }

  async function verifyView() {
    const outcome = $("#verify-outcome");
    const verifyToken = new URLSearchParams(location.search).get("token");
    // Drop the token from the address bar and history as soon as it is read.
    history.replaceState(null, "", `${BASE}/verify`);
    if (!verifyToken) {
      outcome.textContent = "This link has no verification token.";
      outcome.classList.add("error");
      return;
    }
    try {
      await call("PUT", "/users/verify", { token: verifyToken }, { auth: false });
      outcome.textContent = "Your email address is verified.";
      outcome.classList.add("ok");
    } catch (error) {
      outcome.textContent = `Verification failed: ${error.describe()}`;
      outcome.classList.add("error");
    }
  }

  // The same words whatever the API knows of the name: the page must not tell who has an account.
  const RECOVERY_SENT = "If an account matches, we have sent a link to its email address. It is valid for 30 minutes.";

  async function forgotView() {
    const form = $("#forgot-form");
    const submit = $("button[type=submit]", form);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      // Emptied first, so that asking again announces the message again, the same as the first time.
      clearMessages();
      const username = form.elements.username.value.trim();
      if (!username) {
        fail("Give your username or email address.");
        form.elements.username.focus();
        return;
      }
      submit.disabled = true;
      try {
        // Without the session token: a request from a logged-in session is refused (401).
        await call("POST", "/users/recover", { username }, { auth: false });
        say(RECOVERY_SENT);
      } catch (error) {
        if (error.status === 429) {
          fail(`Too many recovery requests from your network: try again ${waitFor(error)}.`);
        } else {
          fail(error);
        }
      } finally {
        submit.disabled = false;
      }
    });
  }

  async function recoverView() {
    const form = $("#recover-form");
    const submit = $("button[type=submit]", form);
    const result = $("#recover-outcome");
    const recoveryToken = new URLSearchParams(location.search).get("token");
    // Drop the token from the address bar and history as soon as it is read: it is kept only here.
    history.replaceState(null, "", `${BASE}/recover`);

    /** Replace the form by the end of the story: a message and where to go next. */
    const conclude = (kind, message, next) => {
      form.hidden = true;
      clearMessages();
      result.className = `card ${kind}`;
      const link = element("a", { href: `${BASE}${next.path}`, textContent: next.text });
      link.dataset.nav = "";
      result.replaceChildren(element("p", { textContent: message }), element("p", {}, link));
      link.focus();
    };
    const deadLink = (message) =>
      conclude("error", message, { path: "/forgot", text: "Ask for a new link" });

    if (!recoveryToken) {
      deadLink("This page needs the link from the recovery email: open that link again, or ask for a new one.");
      return;
    }
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const newPassword = form.elements.newPassword.value;
      const confirmNewPassword = form.elements.confirmNewPassword.value;
      if (newPassword.length < 8 || newPassword.length > 64) {
        fail("The new password must have 8 to 64 characters.");
        form.elements.newPassword.focus();
        return;
      }
      if (newPassword !== confirmNewPassword) {
        fail("The two passwords differ: type the same one twice.");
        form.elements.confirmNewPassword.focus();
        return;
      }
      const body = { token: recoveryToken, newPassword, confirmNewPassword };
      const send = (extra) => request("PUT", "/users/recover", { ...body, ...extra }, { auth: false });
      submit.disabled = true;
      try {
        let reply = await send({});
        if (isChallenge(reply)) {
          // The challenge is bound to this recovery token: the same body, with the answer added.
          reply = await confirmIdentity({
            heading: "Second factor",
            purpose: "Your account is protected by a second factor: answer it to reset the password.",
            challenge: reply.body,
            send,
          });
          if (!reply) return say("Cancelled: your password is unchanged.");
        }
        // The reset signs the owner in (CONTRACT section 14): its answer carries a new session.
        const answered = outcome(reply);
        form.reset();
        await signedIn(answered);
        navigate("/account", { status: "Your password was reset and you are signed in. Every other session was signed out." });
      } catch (error) {
        if (error.code === "INVALID_RECOVERY_TOKEN_ERROR") {
          form.reset();
          deadLink("This recovery link is invalid or expired. A link works once, for 30 minutes, and only the newest one sent.");
        } else if (error.status === 429) {
          fail(`Too many attempts from your network: try again ${waitFor(error)}.`);
        } else {
          failAtField(form, error);
        }
      } finally {
        submit.disabled = false;
      }
    });
  }

  async function accountView() {
    const user = await call("GET", "/users/me");
    const rows = [
      ["Username", user.username],
      ["Email", user.email],
      ["Domain", user.subdomain ? `${user.subdomain}.${user.domain}` : user.domain],
      ["Staff", user.staff ? "yes" : "no"],
      ["Member since", when(user.createdAt)],
      ["Backup code last used", when(user.twoFactorBackupCodeUsedAt)],
    ];
    $("#account-details").replaceChildren(
      ...rows.flatMap(([label, value]) => [element("dt", { textContent: label }), element("dd", { textContent: value ?? "" })]),
    );
    const state = $("#verification-state");
    const resend = $("#resend-verification");
    if (user.verifiedAt) {
      state.textContent = `Verified on ${when(user.verifiedAt)}.`;
    } else {
      state.textContent = `Not verified yet: open the link we sent to ${user.email}.`;
      resend.hidden = false;
      resend.addEventListener("click", async () => {
        try {
          await call("GET", "/users/me/verify");
          say(`Verification email sent to ${user.email}.`);
        } catch (error) {
          fail(error);
        }
      });
    }
  }

  // ------------------------------------------------------------------------------- settings

  /** Run one change of the settings view: the submit button held while it runs, the reply's User
   * shown, and an error said in words with the focus back on the field to correct. Resolves with
   * the change's result, or null when it failed or was cancelled. */
  async function change(form, what, action) {
    const submit = $("button[type=submit]", form);
    clearMessages();
    submit.disabled = true;
    clearFieldErrors(form);
    try {
      return await action();
    } catch (error) {
      if (error && AT_FIELD.has(error.code)) {
        failAtField(form, error, what);
        return null;
      }
      failChange(error, what);
      const field = $("input:not([disabled]), select", form);
      if (field && !(error && error.explained)) field.focus();
      return null;
    } finally {
      submit.disabled = false;
      // The dialog hands the focus back to this button while it is still disabled, so it is lost.
      if (!form.contains(document.activeElement)) submit.focus();
    }
  }

  /** A value the form refuses before asking the API: say why, and put the focus on it. */
  function refuse(field, message) {
    fail(message);
    field.focus();
  }

  function domainName(user) {
    return user.subdomain ? `${user.subdomain}.${user.domain}` : user.domain;
  }

  /** Every offered domain: GET /domains is paginated (at most 50 a page), so read every page. */
  async function allDomains() {
    const domains = [];
    for (let offset = 0; ; offset += 50) {
      const page = await call("GET", `/domains?limit=50&offset=${offset}`);
      domains.push(...page.items);
      if (!page.items.length || domains.length >= page.count) return domains;
    }
  }

  function usernameForm(user) {
    const form = $("#username-form");
    const field = form.elements.username;
    field.value = user.username;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const username = field.value.trim();
      if (!username) return refuse(field, "Type the new username.");
      if (username === user.username) return refuse(field, "That is your username already.");
      const changed = await change(form, "username", () =>
        reverified("PUT", "/users/me/username", { username }, `Change your username to "${username}".`),
      );
      if (changed === null) return;
      if (!changed) return say("Cancelled: your username is unchanged.");
      user.username = changed.username;
      field.value = changed.username;
      say(`Your username is now "${changed.username}".`);
    });
  }

  function emailForm(user) {
    const form = $("#email-form");
    const field = form.elements.email;
    field.value = user.email;
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const email = field.value.trim();
      if (!email) return refuse(field, "Type the new email address.");
      if (email === user.email) return refuse(field, "That is your email address already.");
      const changed = await change(form, "email address", () =>
        reverified("PUT", "/users/me/email", { email }, `Change your email address to ${email}.`),
      );
      if (changed === null) return;
      if (!changed) return say("Cancelled: your email address is unchanged.");
      user.email = changed.email;
      field.value = changed.email;
      say(`Your email address is now ${changed.email}. We sent a verification link to it: open it to verify the address.`);
    });
  }

  function passwordForm() {
    const form = $("#password-form");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const newPassword = form.elements.newPassword.value;
      const confirmNewPassword = form.elements.confirmNewPassword.value;
      // The same rules as the API (never trimmed), checked here first so the dialog is not opened for nothing.
      if (newPassword.length < 8 || newPassword.length > 64) {
        return refuse(form.elements.newPassword, "The new password must have 8 to 64 characters.");
      }
      if (newPassword !== confirmNewPassword) {
        return refuse(form.elements.confirmNewPassword, "The two new passwords differ: type the same one twice.");
      }
      const body = { newPassword, confirmNewPassword };
      const changed = await change(form, "password", () =>
        reverified("PUT", "/users/me/password", body, "Change your password: type the current one."),
      );
      if (changed === null) return;
      if (!changed) return say("Cancelled: your password is unchanged.");
      form.reset();
      say("Your password is changed. This session stays logged in; every other session was signed out.");
    });
  }

  async function domainForm(user) {
    const form = $("#domain-form");
    const choice = form.elements.domain;
    const subdomain = form.elements.subdomain;
    const hint = $("#domain-subdomain-hint");
    const domains = await allDomains();
    const current = () => domains.find((domain) => domain.id === choice.value);
    // A domain that takes no subdomain disables the field (the API would answer SUBDOMAIN_NOT_ALLOWED_ERROR).
    const follow = () => {
      const allows = Boolean(current() && current().subdomains);
      subdomain.disabled = !allows;
      hint.textContent = allows
        ? "Lower-case letters, digits and dashes (spaces become dashes), up to 63. Leave it empty for none."
        : "This domain takes no subdomain.";
    };
    const show = () => {
      $("#domain-current").textContent = domainName(user);
    };
    choice.replaceChildren(...domains.map((domain) => element("option", { value: domain.id, textContent: domain.id })));
    if (!domains.some((domain) => domain.id === user.domain)) {
      // Your domain is no longer offered: keep it listed, so the form shows what you have.
      choice.prepend(element("option", { value: user.domain, textContent: `${user.domain} (no longer offered)` }));
    }
    choice.value = user.domain;
    subdomain.value = user.subdomain || "";
    show();
    follow();
    choice.addEventListener("change", follow);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const wanted = subdomain.disabled ? "" : subdomain.value.trim();
      const body = { domain: choice.value, subdomain: wanted || null };
      // Not reverified (docs/openapi.json): the change is made at once.
      const changed = await change(form, "domain", () => call("PUT", "/users/me/domain", body));
      if (!changed) return;
      user.domain = changed.domain;
      user.subdomain = changed.subdomain;
      subdomain.value = changed.subdomain || "";
      show();
      say(`Your address is now ${domainName(changed)}.`);
    });
  }

  function deleteAccount() {
    const button = $("#delete-account");
    button.addEventListener("click", async () => {
      clearMessages();
      try {
        const purpose = "Delete your account for good: it cannot be undone. Type your password to go on.";
        const done = await reverified("DELETE", "/users/me", {}, purpose);
        if (!done) {
          say("Cancelled: your account is kept.");
          return button.focus();
        }
        // The account and every session are gone: this tab's token is dead, forget it.
        token.clear();
        navigate("/login", { status: "Your account was deleted, and you are logged out." });
      } catch (error) {
        failChange(error, "account");
        button.focus();
      }
    });
  }

  async function settingsView() {
    const user = await call("GET", "/users/me");
    usernameForm(user);
    emailForm(user);
    passwordForm();
    deleteAccount();
    await domainForm(user);
  }

  async function activityView() {
    const page = main.firstElementChild;
    await activityList($("#activity"), "/users/me/activity", { isCurrent: () => main.firstElementChild === page });
  }

  /** Rename a session in place: its name cell becomes a small form; Escape or Cancel puts it back. */
  function renameForm(cell, session, opener) {
    const id = `rename-${session.id}`;
    const input = element("input", { id, name: "name", value: session.name, maxLength: 64, required: true });
    const label = element("label", { htmlFor: id, className: "visually-hidden", textContent: `New name for ${session.name}` });
    const save = element("button", { type: "submit", className: "small", textContent: "Save" });
    const cancel = element("button", { type: "button", className: "secondary small", textContent: "Cancel" });
    const form = element("form", { className: "rename", noValidate: true }, label, input, element("span", { className: "buttons" }, save, cancel));
    const close = () => {
      cell.replaceChildren(session.name);
      opener.hidden = false;
      opener.focus();
    };
    cancel.addEventListener("click", close);
    form.addEventListener("keydown", (event) => {
      if (event.key === "Escape") close();
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const name = input.value.trim();
      if (!name) return refuse(input, "Give the session a name.");
      const path = `/users/me/sessions/${encodeURIComponent(session.id)}`;
      const renamed = await change(form, "session name", () => call("PATCH", path, { name }));
      if (!renamed) return;
      await render({ status: `Session "${session.name}" renamed to "${renamed.name}".` });
      // The list is drawn again: give the focus back to the renamed session's button.
      const again = $(`tr[data-session-id="${CSS.escape(session.id)}"] button`, main);
      if (again) again.focus();
    });
    opener.hidden = true;
    cell.replaceChildren(form);
    input.focus();
    input.select();
  }

  async function sessionsView() {
    const [list, self] = await Promise.all([
      call("GET", "/users/me/sessions?limit=50"),
      call("GET", "/users/me/sessions/me"),
    ]);
    const rows = list.items.map((session) => {
      const mine = session.id === self.id;
      const kind = session.permissionFlags === null ? "Login" : `API key: ${scopeNames(session.permissionFlags)}`;
      const actions = element("td", { className: "actions" });
      const rename = element("button", { type: "button", className: "secondary small", textContent: "Rename" });
      rename.setAttribute("aria-label", `Rename ${session.name}`);
      rename.addEventListener("click", () => renameForm(heading, session, rename));
      if (mine) {
        actions.append(element("span", { className: "badge", textContent: "This session" }), rename);
      } else {
        const revoke = element("button", { type: "button", className: "danger small", textContent: "Revoke" });
        revoke.setAttribute("aria-label", `Revoke ${session.name}`);
        revoke.addEventListener("click", async () => {
          try {
            await call("DELETE", `/users/me/sessions/${encodeURIComponent(session.id)}`);
            await render({ status: `Session "${session.name}" revoked.` });
          } catch (error) {
            fail(error);
          }
        });
        actions.append(rename, revoke);
      }
      const heading = element("th", { scope: "row", textContent: session.name });
      const row = element(
        "tr",
        {},
        heading,
        labelled("Kind", kind),
        labelled("Last used", when(session.usedAt)),
        labelled("Expires", fromUnix(session.exp)),
        actions,
      );
      row.dataset.sessionId = session.id;
      return row;
    });
    $("#sessions-table tbody").replaceChildren(...rows);
    $("#sessions-count").textContent =
      list.count > list.items.length ? `Showing ${list.items.length} of ${list.count} sessions.` : `${list.count} sessions.`;
    $("#revoke-others").addEventListener("click", async () => {
      try {
        const done = await call("DELETE", "/users/me/sessions/all?include-self=false");
        await render({ status: `${done.count} other sessions revoked.` });
      } catch (error) {
        fail(error);
      }
    });
  }

  async function keysView() {
    const user = await call("GET", "/users/me");
    const fieldset = $("#key-scopes");
    for (const [name, bit] of Object.entries(SCOPES)) {
      if (name.startsWith("STAFF_") && !user.staff) continue; // refused (403) for non-staff anyway
      const input = element("input", { type: "checkbox", name: "scope", value: String(bit) });
      fieldset.append(element("label", { className: "check" }, input, ` ${name}`));
    }
    const form = $("#key-form");
    const created = $("#key-created");
    const tokenField = $("#key-token");
    const forget = () => {
      tokenField.value = "";
      created.hidden = true;
    };
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const flags = [...form.querySelectorAll("input[name=scope]:checked")].reduce((sum, box) => sum | Number(box.value), 0);
      const name = form.elements.name.value.trim();
      if (!name) return fail("Give the key a name.");
      if (!flags) return fail("Choose at least one scope.");
      try {
        const body = { name, permissionFlags: flags, longLived: form.elements.longLived.checked };
        const session = await reverified("POST", "/users/me/sessions", body, `Create the API key "${name}".`);
        if (!session) return say("Cancelled.");
        // Shown once: kept only in this field, never stored, gone when dismissed or on leaving.
        tokenField.value = session.token;
        created.hidden = false;
        form.reset();
        say(`API key "${session.name}" created.`);
        tokenField.focus();
        tokenField.select();
      } catch (error) {
        fail(error);
      }
    });
    $("#key-copy").addEventListener("click", (event) => copy(tokenField.value, event.currentTarget));
    $("#key-done").addEventListener("click", () => {
      forget();
      say("The key is hidden now. Revoke it under Sessions if it is lost.");
      form.elements.name.focus();
    });
  }

  function showBackupCodes(codes) {
    const box = $("#backup-codes");
    $("#backup-list").replaceChildren(...codes.map((code) => element("li", {}, element("code", { textContent: code }))));
    box.hidden = false;
    box.dataset.codes = codes.join("\n");
  }

  /** What a factor is, in words: a passkey signs in alone, a security key only answers after a password. */
  function factorKind(factor) {
    if (factor.type === "webauthn") return factor.passkey ? "Passkey" : "Security key";
    return FACTOR_TYPES[factor.type] || factor.type;
  }

  async function loadFactors() {
    const factors = await call("GET", "/users/me/2fa?limit=50");
    passkeys = Promise.resolve(factors.items.some((factor) => factor.passkey));
    const list = $("#factors-list");
    // Backup codes back up a factor: the API refuses them (USER_REQUIRES_SECOND_FACTOR_ERROR) without one.
    $("#backup-regenerate").hidden = !factors.count;
    $("#backup-needs-factor").hidden = Boolean(factors.count);
    if (!factors.items.length) {
      list.replaceChildren(element("li", { textContent: "None yet: add an authenticator app or a passkey below." }));
      return;
    }
    list.replaceChildren(
      ...factors.items.map((factor) => {
        const remove = element("button", { type: "button", className: "danger small", textContent: "Remove" });
        remove.setAttribute("aria-label", `Remove ${factor.name}`);
        remove.addEventListener("click", async () => {
          try {
            const path = `/users/me/2fa/${encodeURIComponent(factor.id)}`;
            const done = await reverified("DELETE", path, {}, `Remove the second factor "${factor.name}".`);
            if (!done) return say("Cancelled.");
            await loadFactors();
            say(`Second factor "${factor.name}" removed.`);
          } catch (error) {
            fail(error);
          }
        });
        const label = element("span", {}, element("strong", { textContent: factor.name }), ` ${factorKind(factor)}, added ${when(factor.createdAt)}`);
        return element("li", { className: "factor" }, label, remove);
      }),
    );
  }

  async function securityView() {
    await loadFactors();

    // TOTP: start (reverified), show the secret as a QR code and text, confirm with a code.
    let totpToken = null;
    const setup = $("#totp-setup");
    $("#totp-start").addEventListener("click", async () => {
      try {
        const started = await reverified("POST", "/users/me/2fa/totp", {}, "Set up an authenticator app.");
        if (!started) return say("Cancelled.");
        totpToken = started.token;
        const qr = qrcode(0, "M"); // the smallest version that holds the otpauth URI
        qr.addData(started.uri);
        qr.make();
        $("#totp-qr").src = qr.createDataURL(4, 8);
        $("#totp-secret").textContent = started.secret;
        setup.hidden = false;
        $("#totp-code").focus();
      } catch (error) {
        fail(error);
      }
    });
    $("#totp-confirm").addEventListener("submit", async (event) => {
      event.preventDefault();
      const form = event.currentTarget;
      try {
        const body = { token: totpToken, name: form.elements.name.value.trim(), code: form.elements.code.value.trim() };
        const factor = await call("POST", "/users/me/2fa/totp/confirm", body);
        totpToken = null;
        setup.hidden = true;
        $("#totp-secret").textContent = "";
        $("#totp-qr").removeAttribute("src");
        form.reset();
        if (factor.codes) showBackupCodes(factor.codes);
        await loadFactors();
        say(`Authenticator app "${factor.name}" added.` + (factor.codes ? " Save your backup codes." : ""));
      } catch (error) {
        fail(error);
      }
    });

    // Passkey or security key: creation options from the API (reverified), navigator.credentials.create,
    // confirm. A passkey (discoverable, verifying its user) signs in alone; a security key is a
    // second factor only (CONTRACT section 16).
    $("#passkey-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const passkey = !event.submitter || event.submitter.value !== "security-key";
      const kind = passkey ? "Passkey" : "Security key";
      const name = event.currentTarget.elements.name.value.trim() || kind;
      try {
        const purpose = passkey ? "Add a passkey." : "Add a security key.";
        const options = await reverified("POST", "/users/me/2fa/webauthn", { passkey }, purpose);
        if (!options) return say("Cancelled.");
        let credential;
        try {
          credential = await navigator.credentials.create({ publicKey: creationOptions(options) });
        } catch (error) {
          throw webauthnError(error);
        }
        const body = { token: options.token, name, response: credentialJson(credential) };
        const factor = await call("POST", "/users/me/2fa/webauthn/confirm", body);
        event.target.reset();
        if (factor.codes) showBackupCodes(factor.codes);
        await loadFactors();
        const alone = factor.passkey ? " You can sign in with it alone." : "";
        say(`${kind} "${factor.name}" added.${alone}` + (factor.codes ? " Save your backup codes." : ""));
      } catch (error) {
        fail(error);
      }
    });

    // Backup codes: a new set (the old one stops working), shown once.
    $("#backup-regenerate").addEventListener("click", async () => {
      try {
        const fresh = await reverified("POST", "/users/me/2fa/backup", {}, "Make a new set of backup codes (the old ones stop working).");
        if (!fresh) return say("Cancelled.");
        showBackupCodes(fresh.codes);
        say("New backup codes made: the old ones no longer work.");
      } catch (error) {
        fail(error);
      }
    });
    $("#backup-copy").addEventListener("click", (event) => copy($("#backup-codes").dataset.codes || "", event.currentTarget));
    $("#backup-done").addEventListener("click", () => {
      const box = $("#backup-codes");
      $("#backup-list").replaceChildren();
      delete box.dataset.codes;
      box.hidden = true;
      $("#backup-regenerate").focus();
    });
  }

  // ----------------------------------------------------------------------------------- routing

  const VIEWS = {
    login: { template: "view-login", title: "Log in", run: loginView, guest: true },
    register: { template: "view-register", title: "Create an account", run: registerView, guest: true },
    verify: { template: "view-verify", title: "Email verification", run: verifyView, open: true },
    forgot: { template: "view-forgot", title: "Forgot your password", run: forgotView, guest: true },
    // Open to a tab that is logged in as well: a guest view would redirect, and lose the token.
    recover: { template: "view-recover", title: "Choose a new password", run: recoverView, open: true },
    account: { template: "view-account", title: "Your account", run: accountView },
    sessions: { template: "view-sessions", title: "Sessions", run: sessionsView },
    activity: { template: "view-activity", title: "Activity", run: activityView },
    keys: { template: "view-keys", title: "API keys", run: keysView },
    security: { template: "view-security", title: "Security", run: securityView },
    settings: { template: "view-settings", title: "Settings", run: settingsView },
  };

  /** Where a sign-in goes: the signed-in view the login page was opened for (?next=<view>, only a
   * view of this console that needs a session), else the account. */
  function landing() {
    const next = new URLSearchParams(location.search).get("next");
    const view = next && Object.hasOwn(VIEWS, next) ? VIEWS[next] : null;
    return view && !view.guest && !view.open ? `/${next}` : "/account";
  }

  /** The login page's path for a tab that wants view `name`: logging in lands there (landing()). */
  function loginFor(name) {
    const view = Object.hasOwn(VIEWS, name) ? VIEWS[name] : null;
    const wanted = view && !view.guest && !view.open && name !== "account";
    return wanted ? `/login?next=${encodeURIComponent(name)}` : "/login";
  }

  function currentView() {
    const name = location.pathname.replace(/^\/console\/?/, "").replace(/\/+$/, "");
    if (!name) return token.get() ? "account" : "login";
    return name;
  }

  /** Show the view of the current URL; `status` / `error` are announced once it is on screen. */
  async function render({ status, error } = {}) {
    let name = currentView();
    const loggedIn = Boolean(token.get());
    let view = VIEWS[name];
    if (view && !view.open && !view.guest && !loggedIn) {
      // The view asked for is kept in the address, so that logging in lands on it (landing()).
      history.replaceState(null, "", `${BASE}${loginFor(name)}`);
      name = "login";
    } else if (view && view.guest && loggedIn) {
      history.replaceState(null, "", `${BASE}/account`);
      name = "account";
    }
    view = VIEWS[name];
    // What the previous view left running or known is dropped: its passkey autofill request, and
    // whether the account has a passkey (asked again when needed).
    stopPasskeyAutofill();
    passkeys = null;
    $("#nav").hidden = !loggedIn;
    for (const link of document.querySelectorAll("#nav a")) {
      if (link.pathname === `${BASE}/${name}`) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    clearMessages();
    const template = document.getElementById(view ? view.template : "view-missing");
    main.replaceChildren(template.content.cloneNode(true));
    document.title = `${view ? view.title : "Not found"} - Nimbus`;
    main.dataset.view = view ? name : "missing";
    if (status) say(status);
    if (error) fail(error);
    if (view) {
      main.setAttribute("aria-busy", "true");
      try {
        await view.run();
      } catch (failure) {
        fail(failure);
      } finally {
        main.removeAttribute("aria-busy");
      }
    }
    const heading = $("h1", main);
    if (heading) {
      heading.tabIndex = -1;
      heading.focus({ preventScroll: true });
    }
  }

  function navigate(path, messages) {
    history.pushState(null, "", `${BASE}${path}`);
    return render(messages);
  }

  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[data-nav]");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    navigate(link.pathname.replace(BASE, "") || "/");
  });
  window.addEventListener("popstate", () => render());
  window.addEventListener("pagehide", stopPasskeyAutofill);
  // Back from the browser's page cache: the view is drawn again, and its autofill request with it.
  window.addEventListener("pageshow", (event) => event.persisted && render());

  $("#logout").addEventListener("click", async () => {
    try {
      await request("DELETE", "/users/me/sessions/me");
    } finally {
      // Forget the token even if the API could not be reached: this tab is logged out either way.
      token.clear();
      navigate("/login", { status: "Logged out." });
    }
  });

  render();
})();
