// What the account console (console/app.js) and the staff console (console/staff/staff.js) share:
// the API and the session token, WebAuthn's conversions, the status and error lines, small DOM
// helpers, the scopes, the CONTRACT error codes in words, and the "confirm it's you" dialog (whose
// markup, <dialog id="confirm">, is in both index.html files, the same; its "Use a passkey" button is
// made here, for the console that offers it). Plain JavaScript, no build
// step: both pages load this file before their own script, which takes what it needs from
// window.Nimbus and calls Nimbus.configure() first.
"use strict";

(() => {
  // What differs between the two consoles; see configure().
  const settings = {
    base: "/console",
    explainErrors: false,
    onSessionEnd: null,
    hasPasskey: null,
  };

  /**
   * Set up the shared code for one console:
   * - `base`: the console's path ("/console" or "/console/staff"), for the passkey error's address;
   * - `explainErrors`: whether every ApiError's describe() uses the words of MESSAGES (the staff
   *   console) rather than the API's own message (the account console, which uses explain() for
   *   its account changes);
   * - `onSessionEnd(message)`: called when the session turns out to be dead (revoked elsewhere,
   *   expired), to send the person to that console's login (/console/login, /console/staff/login);
   * - `hasPasskey()`: resolves true when the signed-in account has a passkey, so that reverified()
   *   offers "Use a passkey" beside the password (CONTRACT section 16); without it, never offered.
   */
  function configure(options) {
    Object.assign(settings, options);
  }

  // The session token lives in sessionStorage: it survives a reload of this tab but not closing it,
  // it is not shared with other tabs (each tab is its own session, as a login should be), and unlike
  // a cookie the browser never attaches it to a request by itself, so other sites cannot make
  // requests with it (no CSRF). Script on this page can read it, which is why the CSP allows only
  // this origin's scripts. It never goes into a URL. Both consoles use the same key, so a tab logged
  // in to the account console is logged in to the staff console too (same origin, same tab).
  const TOKEN_KEY = "nimbus.session";

  // Scope bits of shared/nimbus_core/scopes.py (tests/tools/unit/test_local_static.py keeps them equal).
  const SCOPES = {
    ALL: 1,
    UPLOAD_FILE: 2,
    ACCOUNT_READ: 4,
    ACCOUNT_MODIFY: 8,
    SECOND_FACTOR_READ: 16,
    SESSION_READ: 32,
    SESSION_MODIFY: 64,
    FILE_READ: 128,
    FILE_MODIFY: 256,
    STAFF_READ_ACCOUNTS: 512,
    STAFF_MODIFY_ACCOUNTS: 1024,
    STAFF_READ_SECOND_FACTORS: 2048,
    STAFF_MODIFY_SECOND_FACTORS: 4096,
    STAFF_READ_SESSIONS: 8192,
    STAFF_MODIFY_SESSIONS: 16384,
    STAFF_READ_FILES: 32768,
    STAFF_MODIFY_FILES: 65536,
    STAFF_MODIFY_DOMAINS: 131072,
    STAFF_MODIFY_INSTRUCTIONS: 262144,
    STAFF_MODIFY_KILLSWITCHES: 524288,
    STAFF_MODIFY_LOGLEVEL: 1048576,
  };

  const FACTOR_TYPES = { totp: "Authenticator app", webauthn: "Passkey or security key", backup: "Backup code" };
  const CHALLENGE = "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR";

  const $ = (selector, root = document) => root.querySelector(selector);

  // ------------------------------------------------------------------------------------ the API

  const token = {
    get: () => sessionStorage.getItem(TOKEN_KEY),
    set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
    clear: () => sessionStorage.removeItem(TOKEN_KEY),
  };

  // Known devices (CONTRACT section 8): the token each sign-in answers, which lets this browser past
  // a login lock that someone who knows only the username put on the account. Unlike the session it
  // must outlive the tab, so it lives in localStorage, per account (under its lower-cased username
  // and address, as either may be typed), and it is only ever sent as POST /login's `device`.
  const DEVICES_KEY = "nimbus.devices";

  const devices = {
    all() {
      try {
        const stored = JSON.parse(localStorage.getItem(DEVICES_KEY));
        return stored && typeof stored === "object" ? stored : {};
      } catch {
        return {};
      }
    },
    /** The device token kept for the login name typed, if any. */
    for(name) {
      const kept = this.all()[String(name || "").trim().toLowerCase()];
      return typeof kept === "string" ? kept : undefined;
    },
    remember(names, value) {
      const all = this.all();
      for (const name of names) if (name) all[String(name).trim().toLowerCase()] = value;
      localStorage.setItem(DEVICES_KEY, JSON.stringify(all));
    },
  };

  /** After a sign-in: keep its session for this tab and its device token for the account (under the
   * names typed, and the account's own username and address once it answers). */
  async function signedIn(reply, ...names) {
    token.set(reply.token);
    if (!reply.device) return;
    try {
      const me = await call("GET", "/users/me");
      names.push(me.username, me.email);
    } catch {
      // The names typed are enough to find it at the next login.
    }
    devices.remember(names, reply.device);
  }

  /** An error answer of the API: its CONTRACT code and message (and fields, when it names some);
   * `retryAfter` is the seconds a 429 asks to wait, when it says. */
  class ApiError extends Error {
    constructor(status, body, retryAfter = null) {
      const code = body && body.code ? body.code : `HTTP_${status}`;
      const message = body && body.message ? body.message : "Unexpected answer from the API";
      super(message);
      this.status = status;
      this.code = code;
      this.body = body || {};
      this.retryAfter = retryAfter;
    }

    /** "<words> (CODE)": the words of MESSAGES when the console explains errors (and has words for
     * the code), else the API's message and the fields it names. */
    describe() {
      const words = settings.explainErrors && MESSAGES[this.code];
      if (words) return `${words(undefined, this)} (${this.code})`;
      const fields = Array.isArray(this.body.fields) ? ` [${this.body.fields.join(", ")}]` : "";
      return `${this.message}${fields} (${this.code})`;
    }
  }

  /** One API call: {status, body}. The session token goes in Authorization unless auth is false. */
  async function request(method, path, body, { auth = true } = {}) {
    const headers = {};
    const stored = token.get();
    if (auth && stored) headers.Authorization = stored; // the bare token (CONTRACT section 3)
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let reply;
    try {
      reply = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (error) {
      throw new ApiError(0, { code: "NETWORK_ERROR", message: `The API cannot be reached: ${error.message}` });
    }
    const text = await reply.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    const retryAfter = Number(reply.headers.get("Retry-After")) || null;
    return { status: reply.status, ok: reply.ok, body: parsed, retryAfter };
  }

  /** A reply's body if it succeeded, else an ApiError. A dead session (revoked elsewhere, expired)
   * sends you to log in (configure's onSessionEnd); that error is then already explained and not
   * shown again. */
  function outcome(reply) {
    if (reply.ok) return reply.body;
    const error = new ApiError(reply.status, reply.body, reply.retryAfter);
    if (error.code === "INVALID_SESSION_ERROR" && reply.status === 401 && token.get()) {
      token.clear();
      error.explained = true;
      if (settings.onSessionEnd) settings.onSessionEnd("Your session has ended: please log in again.");
    }
    throw error;
  }

  /** An API call that must succeed: its body, or an ApiError. */
  async function call(method, path, body, options) {
    return outcome(await request(method, path, body, options));
  }

  const isChallenge = (reply) => reply.status === 401 && reply.body && reply.body.code === CHALLENGE;

  // Answers the person can correct in the dialog; any other error closes it and shows on the page.
  const RETRY_IN_DIALOG = new Set([
    "INVALID_PASSWORD_ERROR",
    "INVALID_SECOND_FACTOR_RESPONSE_ERROR",
    "INVALID_SECOND_FACTOR_METHOD_ERROR",
    "MISSING_FIELDS_ERROR",
  ]);

  // ------------------------------------------------------------------------- errors in words

  /** "in 12 minutes": how long a 429 asks to wait, in words. The account changes count per day, so
   * past 90 minutes the wait is said in hours ("in 1440 minutes" means nothing to anyone). */
  function waitFor(error) {
    const minutes = Math.ceil((error.retryAfter || 0) / 60);
    if (minutes > 90) return `in ${Math.ceil(minutes / 60)} hours`;
    if (minutes > 1) return `in ${minutes} minutes`;
    return minutes === 1 ? "in a minute" : "later";
  }

  // What the CONTRACT error codes mean, in words, for both consoles (docs/openapi.json lists the
  // codes each operation answers). `what` names the thing being changed ("username", "email
  // address", ...; undefined outside the account changes) and `error` is the ApiError, for the
  // fields at fault or the wait of a 429. The code stays in brackets after the words, so that a
  // support request can quote it.
  const MESSAGES = {
    INVALID_USERNAME_ERROR: () => "A username has 1 to 64 characters: letters, digits, _ . and - only.",
    INVALID_EMAIL_ERROR: () => "That is not a valid email address.",
    USER_EXISTS_ERROR: (what) => `That ${what || "name"} belongs to another account: choose another one.`,
    PASSWORDS_DO_NOT_MATCH_ERROR: () => "The two new passwords differ: type the same one twice.",
    // Register, a password change, the staff's and the recovery reset refuse a listed password
    // (CONTRACT section 17); `fields` names the field (password or newPassword).
    INSECURE_PASSWORD_ERROR: () => "This password appears in lists of breached passwords; choose another.",
    INVALID_PASSWORD_ERROR: () => "The password is wrong.",
    INVALID_SECOND_FACTOR_RESPONSE_ERROR: () => "The second-factor answer was wrong or too late: try again.",
    INVALID_SECOND_FACTOR_METHOD_ERROR: () => "That kind of second factor is not set up on this account.",
    INVALID_DOMAIN_ERROR: () => "That domain is no longer offered: choose one from the list.",
    SUBDOMAIN_NOT_ALLOWED_ERROR: () => "This domain takes no subdomain: leave the subdomain empty.",
    SUBDOMAIN_TOO_LONG_ERROR: () =>
      "The subdomain is too long: at most 63 letters, digits and dashes once spaces become dashes.",
    INVALID_FIELDS_ERROR: (what, error) => invalidFields(error.body.fields),
    MISSING_FIELDS_ERROR: (what, error) => `Something is missing (${(error.body.fields || []).join(", ")}): fill it in.`,
    BODY_TOO_LARGE_ERROR: () => "That is far too long.",
    INVALID_BODY_ERROR: () => "The console sent a request the API could not read: reload the page and try again.",
    // On PATCH /users/me/sessions/:sid (or a staff action on a session), a 404: the session is gone.
    INVALID_SESSION_ERROR: () => "That session no longer exists: it was revoked or it expired.",
    INSUFFICIENT_PERMISSIONS_ERROR: () =>
      "This session is not allowed to do that (staff actions need a staff account, and an API key needs the scope).",
    ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR: () =>
      "Staff endpoints need a second factor on your account: add an authenticator app or a passkey in the account console (Security), then come back.",
    USER_REQUIRES_SECOND_FACTOR_ERROR: () =>
      "The account has no second factor, and this needs one: a second factor must be added first.",
    INVALID_USER_ERROR: () => "There is no such user (any more).",
    INVALID_SECOND_FACTOR_ERROR: () => "There is no such second factor (any more).",
    EMAIL_ALREADY_VERIFIED_ERROR: () => "The email address is already verified.",
    EMAIL_NOT_VERIFIED_ERROR: () => "The email address is not verified.",
    INVALID_LOGLEVEL_ERROR: () => "That is not a log level: DEBUG, INFO, WARN, ERROR or NONE.",
    BANNED_ERROR: () => "This account is banned.",
    // Both the endpoint's own limit (3 username changes a day...) and the lock on failed passwords.
    RATELIMITED_ERROR: (what, error) => `Too many tries for now: try again ${waitFor(error)}.`,
    SERVICE_UNAVAILABLE_ERROR: (what, error) =>
      error.body.feature !== undefined
        ? `Kill switch number ${error.body.feature} has turned this off: try again later.`
        : "This is switched off for maintenance at the moment: try again later.",
    INTERNAL_SERVER_ERROR: () => "Something went wrong on our side: nothing was changed, try again.",
  };

  // INVALID_FIELDS_ERROR names the fields out of bounds; these are the ones the consoles send.
  const FIELD_BOUNDS = {
    name: "A session name has 1 to 64 characters.",
    newPassword: "The new password must have 8 to 64 characters.",
    confirmNewPassword: "The new password must have 8 to 64 characters.",
    domain: "Choose a domain from the list.",
    subdomain: "That subdomain cannot be used: use letters, digits and dashes.",
  };

  function invalidFields(fields) {
    const said = [...new Set((fields || []).map((field) => FIELD_BOUNDS[field]).filter(Boolean))];
    if (said.length) return said.join(" ");
    return fields && fields.length ? `A value is out of its bounds (${fields.join(", ")}).` : "A value is out of its bounds.";
  }

  /** An error in words: "<what it means> (CODE)", whatever configure's explainErrors. Errors
   * without an entry (the network, WebAuthn) keep their own description. */
  function explain(error, what) {
    if (!(error instanceof ApiError)) return String(error && error.message ? error.message : error);
    const words = MESSAGES[error.code];
    return words ? `${words(what, error)} (${error.code})` : error.describe();
  }

  // ----------------------------------------------------------------------------------- WebAuthn

  // The API speaks the JSON form of WebAuthn (base64url strings); navigator.credentials wants
  // ArrayBuffers. These convert both ways without relying on the newer JSON helpers.
  const b64url = {
    decode(text) {
      const base64 = text.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(text.length / 4) * 4, "=");
      return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0)).buffer;
    },
    encode(buffer) {
      let binary = "";
      for (const byte of new Uint8Array(buffer)) binary += String.fromCharCode(byte);
      return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    },
  };

  const withIds = (list) => (list || []).map((item) => ({ ...item, id: b64url.decode(item.id) }));

  function requestOptions(options) {
    return { ...options, challenge: b64url.decode(options.challenge), allowCredentials: withIds(options.allowCredentials) };
  }

  /** The authenticator's answer to the API's request options (their JSON form), as the API wants
   * it. `mediation` and `signal` go to navigator.credentials.get as they are: "conditional" lets the
   * browser offer its passkeys in the username field's autofill. A refusal is an ApiError. */
  async function passkeyAssertion(options, { mediation, signal } = {}) {
    if (!options) throw new ApiError(0, { code: "WEBAUTHN_ERROR", message: "The API sent no passkey challenge." });
    const asked = { publicKey: requestOptions(options) };
    if (mediation) asked.mediation = mediation;
    if (signal) asked.signal = signal;
    let credential;
    try {
      credential = await navigator.credentials.get(asked);
    } catch (error) {
      throw webauthnError(error);
    }
    return credentialJson(credential);
  }

  /** PublicKeyCredential -> the JSON the API expects (PublicKeyCredential.toJSON()'s shape). */
  function credentialJson(credential) {
    if (typeof credential.toJSON === "function") return credential.toJSON();
    const r = credential.response;
    const response = { clientDataJSON: b64url.encode(r.clientDataJSON) };
    if (r.attestationObject) {
      response.attestationObject = b64url.encode(r.attestationObject);
      response.transports = typeof r.getTransports === "function" ? r.getTransports() : [];
    } else {
      response.authenticatorData = b64url.encode(r.authenticatorData);
      response.signature = b64url.encode(r.signature);
      response.userHandle = r.userHandle ? b64url.encode(r.userHandle) : null;
    }
    return {
      id: credential.id,
      rawId: b64url.encode(credential.rawId),
      type: credential.type,
      authenticatorAttachment: credential.authenticatorAttachment || null,
      clientExtensionResults: credential.getClientExtensionResults(),
      response,
    };
  }

  function webauthnError(error) {
    const reasons = {
      NotAllowedError: "The passkey request was cancelled or timed out.",
      InvalidStateError: "This passkey is already registered.",
      NotSupportedError: "This browser or device cannot keep a passkey: add it as a security key instead.",
      AbortError: "The passkey request was stopped.",
      SecurityError: `Passkeys work only on the console's own address (http://localhost:<port>${settings.base}/).`,
    };
    return new ApiError(0, { code: "WEBAUTHN_" + (error.name || "ERROR"), message: reasons[error.name] || error.message });
  }

  // --------------------------------------------------------------------- status and rendering

  function say(message) {
    $("#error").textContent = "";
    $("#status").textContent = message || "";
  }

  function fail(error) {
    if (error && error.explained) return;
    $("#status").textContent = "";
    $("#error").textContent = error instanceof ApiError ? error.describe() : String(error && error.message ? error.message : error);
  }

  function clearMessages() {
    $("#status").textContent = "";
    $("#error").textContent = "";
  }

  const when = (iso) => (iso ? new Date(iso).toLocaleString() : "never");
  const fromUnix = (seconds) => new Date(seconds * 1000).toLocaleString();

  function element(tag, properties = {}, ...children) {
    const node = document.createElement(tag);
    Object.assign(node, properties);
    node.append(...children);
    return node;
  }

  // A cell that names its column, for the one-card-per-row layout on phones (the stylesheets).
  function labelled(label, text) {
    const cell = element("td", { textContent: text });
    cell.dataset.label = label;
    return cell;
  }

  function scopeNames(flags) {
    return Object.entries(SCOPES)
      .filter(([, bit]) => flags & bit)
      .map(([name]) => name)
      .join(", ");
  }

  // ---------------------------------------------------------- confirming it's you (the dialog)

  const dialog = {
    root: $("#confirm"),
    form: $("#confirm-form"),
    heading: $("#confirm-heading"),
    purpose: $("#confirm-purpose"),
    passwordStep: $("#confirm-password-step"),
    password: $("#confirm-password"),
    factorStep: $("#confirm-factor-step"),
    types: $("#confirm-types"),
    codeRow: $("#confirm-code-row"),
    codeLabel: $("#confirm-code-label"),
    code: $("#confirm-code"),
    error: $("#confirm-error"),
    submit: $("#confirm-submit"),
    cancel: $("#confirm-cancel"),
    // The passkey's way past the password step (CONTRACT section 16), shown only when offered.
    passkey: element("button", { type: "button", id: "confirm-passkey", className: "secondary", textContent: "Use a passkey", hidden: true }),
  };
  if (dialog.submit) dialog.submit.after(dialog.passkey);

  /**
   * Ask for the password (unless a challenge is already given), then answer the second-factor
   * challenge the API may send back (CONTRACT section 9). `send(extra)` repeats the request with
   * `{password}` or `{"2fa": ...}` added. When `passkey` is given (a function answering the reply of
   * POST /users/me/reverify), the password step also offers "Use a passkey": the account's passkey
   * answers instead of the password and any second factor (CONTRACT section 16). Resolves with the
   * final reply (a success, or an error that another try would not fix), or null if cancelled.
   * Focus goes to the dialog, and back to where it was when the dialog closes.
   */
  function confirmIdentity({ heading = "Confirm it's you", purpose, challenge = null, send, passkey = null }) {
    // One question at a time: a second request (a double click) gets no answer of the first.
    if (dialog.root.open) return Promise.resolve(null);
    return new Promise((resolve) => {
      let current = challenge;
      const returnTo = document.activeElement;
      dialog.heading.textContent = heading;
      dialog.purpose.textContent = purpose;
      dialog.error.textContent = "";
      dialog.password.value = "";
      dialog.code.value = "";

      const showFactors = (body) => {
        current = body;
        dialog.passwordStep.hidden = true;
        dialog.passkey.hidden = true;
        dialog.factorStep.hidden = false;
        dialog.types.replaceChildren(element("legend", { textContent: "Answer with" }));
        body.types.forEach((type, index) => {
          const input = element("input", { type: "radio", name: "factor", value: type, checked: index === 0 });
          input.addEventListener("change", chooseType);
          dialog.types.append(element("label", { className: "check" }, input, " " + (FACTOR_TYPES[type] || type)));
        });
        chooseType();
      };
      const selected = () => ($("input[name=factor]:checked", dialog.types) || {}).value;
      function chooseType() {
        const type = selected();
        dialog.codeRow.hidden = type === "webauthn";
        dialog.codeLabel.textContent = type === "backup" ? "Backup code" : "Code from your authenticator app";
        dialog.code.inputMode = type === "totp" ? "numeric" : "text";
        dialog.submit.textContent = type === "webauthn" ? "Use passkey" : "Continue";
        (type === "webauthn" ? dialog.submit : dialog.code).focus();
      }

      const finish = (value) => {
        dialog.form.removeEventListener("submit", onSubmit);
        dialog.cancel.removeEventListener("click", onCancel);
        dialog.root.removeEventListener("cancel", onCancel);
        dialog.passkey.removeEventListener("click", onPasskey);
        dialog.passkey.hidden = true;
        dialog.password.value = "";
        dialog.code.value = "";
        dialog.root.close();
        if (returnTo && returnTo.isConnected && typeof returnTo.focus === "function") returnTo.focus();
        resolve(value);
      };

      async function answer() {
        if (!current) return send({ password: dialog.password.value });
        const type = selected();
        const twoFa = { token: current.token, type };
        if (type === "webauthn") {
          twoFa.response = await passkeyAssertion(current.challenge);
        } else {
          twoFa.code = dialog.code.value.trim();
        }
        return send({ "2fa": twoFa });
      }

      /** Reverify with the account's passkey: a challenge from the API, the authenticator's answer
       * to it, and the request sent again with that answer instead of the password. */
      async function answerWithPasskey() {
        const started = await passkey();
        if (!started.ok) return started;
        const response = await passkeyAssertion(started.body.challenge);
        return send({ "2fa": { type: "webauthn", token: started.body.token, response } });
      }

      /** Run one answer with the buttons held; then go on to the second factor, finish, or say
       * what was wrong and let the person try again (the API counts attempts). */
      async function attempt(run, retryFocus) {
        dialog.error.textContent = "";
        dialog.submit.disabled = true;
        dialog.passkey.disabled = true;
        try {
          const reply = await run();
          if (isChallenge(reply)) {
            showFactors(reply.body);
          } else if (reply.ok || !RETRY_IN_DIALOG.has(reply.body && reply.body.code)) {
            finish(reply);
          } else {
            dialog.error.textContent = new ApiError(reply.status, reply.body).describe();
            dialog.code.value = "";
            const field = retryFocus();
            field.focus();
            if (field === dialog.password) dialog.password.select();
          }
        } catch (error) {
          dialog.error.textContent = error instanceof ApiError ? error.describe() : String(error);
        } finally {
          dialog.submit.disabled = false;
          dialog.passkey.disabled = false;
        }
      }

      function onSubmit(event) {
        event.preventDefault();
        return attempt(answer, () => (current ? dialog.code : dialog.password));
      }
      function onPasskey() {
        return attempt(answerWithPasskey, () => dialog.passkey);
      }
      function onCancel(event) {
        event.preventDefault();
        finish(null);
      }

      dialog.form.addEventListener("submit", onSubmit);
      dialog.cancel.addEventListener("click", onCancel);
      dialog.root.addEventListener("cancel", onCancel);
      dialog.passkey.addEventListener("click", onPasskey);
      if (challenge) {
        showFactors(challenge);
      } else {
        dialog.passwordStep.hidden = false;
        dialog.factorStep.hidden = true;
        dialog.passkey.hidden = !passkey;
        dialog.submit.textContent = "Continue";
      }
      dialog.root.showModal();
      (challenge ? (selected() === "webauthn" ? dialog.submit : dialog.code) : dialog.password).focus();
    });
  }

  /** Whether to offer "Use a passkey" (configure's hasPasskey); a failure to tell means no, but a
   * session found dead on the way (already explained, the person sent to log in) stops here. */
  async function passkeyOffered() {
    if (!settings.hasPasskey) return false;
    try {
      return Boolean(await settings.hasPasskey());
    } catch (error) {
      if (error && error.explained) throw error;
      return false;
    }
  }

  /** A request on a Reverify endpoint: the password (and second factor) asked in the dialog, or the
   * account's passkey when it has one. */
  async function reverified(method, path, body, purpose) {
    const passkey = (await passkeyOffered()) ? () => request("POST", "/users/me/reverify", {}) : null;
    const send = (extra) => request(method, path, { ...body, ...extra });
    const reply = await confirmIdentity({ purpose, send, passkey });
    return reply ? outcome(reply) : null;
  }

  // ------------------------------------------------------------------------- field errors

  /**
   * Say an API error at the fields it names (`fields` of the error body) in `form`: each field is
   * marked invalid and gets the error's words under it, linked by aria-describedby so a screen
   * reader reads them with the field; the first one takes the focus. Typing in a field clears its
   * mark. Returns whether a field of the form was named (the page's alert says the error anyway).
   */
  function showFieldError(form, error) {
    clearFieldErrors(form);
    const names = error instanceof ApiError && Array.isArray(error.body.fields) ? error.body.fields : [];
    const fields = names.map((name) => form.elements[name]).filter((field) => field && field.id);
    // The words only, at the field: the page's alert has the code too.
    const words = MESSAGES[error.code] ? MESSAGES[error.code](undefined, error) : error.message;
    for (const field of fields) {
      const note = element("small", { id: `${field.id}-error`, className: "field-error", textContent: words });
      field.after(note);
      field.setAttribute("aria-invalid", "true");
      field.dataset.describedBy = field.getAttribute("aria-describedby") || "";
      field.setAttribute("aria-describedby", `${note.id} ${field.dataset.describedBy}`.trim());
      field.addEventListener("input", () => clearFieldError(field), { once: true });
    }
    if (fields.length) fields[0].focus();
    return fields.length > 0;
  }

  function clearFieldError(field) {
    const note = document.getElementById(`${field.id}-error`);
    if (note) note.remove();
    if (field.dataset.describedBy !== undefined) {
      if (field.dataset.describedBy) field.setAttribute("aria-describedby", field.dataset.describedBy);
      else field.removeAttribute("aria-describedby");
      delete field.dataset.describedBy;
    }
    field.removeAttribute("aria-invalid");
  }

  function clearFieldErrors(form) {
    for (const field of form.querySelectorAll("[aria-invalid]")) clearFieldError(field);
  }

  // ------------------------------------------------------------------------------ activity

  // An account's security events (CONTRACT section 17) in words. A type the console does not know
  // yet (the API may add some) is said from its name: "session-revoked" -> "Session revoked".
  const EVENT_TYPES = {
    "sign-in": "Sign-in",
    registered: "Account created",
    reverify: "Confirming it's you",
    "more-failures": "More failed attempts",
    "password-changed": "Password changed",
    "password-reset": "Password reset",
    "email-changed": "Email address changed",
    "username-changed": "Username changed",
    "factor-added": "Second factor added",
    "factor-removed": "Second factor removed",
    "backup-codes": "New backup codes made",
    "api-key-created": "API key created",
    "session-revoked": "Session revoked",
    "sessions-revoked": "Sessions revoked",
    "staff-granted": "Made staff",
    "staff-removed": "Staff rights removed",
    banned: "Account banned",
    unbanned: "Ban lifted",
    "account-changed": "Account changed by staff",
  };

  // How a sign-in (or a confirmation) was answered: `method` of the event.
  const EVENT_METHODS = {
    password: "with the password",
    totp: "with an authenticator app code",
    backup: "with a backup code",
    webauthn: "with a security key",
    passkey: "with a passkey",
    recovery: "through a password reset link",
  };

  function fromName(name) {
    const words = String(name || "event").replace(/[-_]+/g, " ").trim();
    return words.charAt(0).toUpperCase() + words.slice(1);
  }

  /** What an event records, in words: its type, how it was answered, what it counts. */
  function eventWhat(event) {
    const what = EVENT_TYPES[event.type] || fromName(event.type);
    if (event.type === "more-failures") {
      const count = Number(event.count) || 0;
      return `${count} more failed ${count === 1 ? "attempt" : "attempts"} in that hour`;
    }
    if (!event.method) return what;
    return `${what} ${EVENT_METHODS[event.method] || `with ${fromName(event.method).toLowerCase()}`}`;
  }

  /** Where an event came from: a staff member (never who) or the operator's tool, else the IP
   * address and the device. */
  function eventFrom(event) {
    if (event.device === "staff") return "A staff member";
    if (event.device === "operator" && !event.ip) return "An operator";
    const parts = [event.ip, event.device].filter(Boolean);
    return parts.length ? parts.join(", ") : "Unknown";
  }

  /** One table row of an event: when (local time), what, outcome, from where. A failure says so in
   * words and with its error code, and its row is marked (class "failed"), not by colour alone. */
  function activityRow(event) {
    const at = element("time", { dateTime: event.at, textContent: when(event.at) });
    const heading = element("th", { scope: "row" }, at);
    const what = element("td", {}, eventWhat(event));
    what.dataset.label = "What";
    for (const line of event.details || []) what.append(element("br"), element("small", { textContent: line }));
    const failed = event.outcome === "failure";
    const result = element("td", { className: failed ? "outcome failed" : "outcome" });
    result.dataset.label = "Outcome";
    if (failed) {
      result.append(element("strong", { textContent: "Failed" }));
      // The code may break after its underscores only (<wbr>), never inside a word.
      if (event.code) result.append(" ", element("code", {}, ...event.code.split("_").flatMap((part, i) => (i ? ["_", element("wbr"), part] : [part]))));
    } else {
      result.append("Succeeded");
    }
    const row = element("tr", {}, heading, what, result, labelled("From", eventFrom(event)));
    row.dataset.eventId = event.id;
    row.dataset.type = event.type;
    if (failed) row.classList.add("failed");
    return row;
  }

  /**
   * An activity list in `root` (the markup of the activity view: a table, #activity-count,
   * #activity-page and the Previous, Next and Refresh buttons), read page by page from `path`
   * (GET /users/me/activity or /users/:id/activity), newest first. Events arrive a few seconds after
   * what they record, so Refresh reads the page again. `isCurrent()` tells whether the page is
   * still shown (a newer view replaces it while a request waits). Resolves once the first page is
   * shown.
   */
  async function activityList(root, path, { limit = 25, isCurrent = () => true } = {}) {
    const parts = {
      body: $("tbody", root),
      count: $("[data-activity=count]", root),
      page: $("[data-activity=page]", root),
      previous: $("[data-activity=previous]", root),
      next: $("[data-activity=next]", root),
      refresh: $("[data-activity=refresh]", root),
      pager: $(".pager", root),
    };
    let offset = 0;
    let total = 0;

    async function load(to, focus, said) {
      const list = await call("GET", `${path}?limit=${limit}&offset=${to}`);
      if (!isCurrent()) return;
      offset = to;
      total = list.count;
      parts.body.replaceChildren(...list.items.map(activityRow));
      if (!list.items.length) {
        const empty = element("td", { colSpan: 4, textContent: offset ? "No events on this page." : "No activity recorded yet." });
        parts.body.replaceChildren(element("tr", {}, empty));
      }
      const first = list.items.length ? offset + 1 : 0;
      parts.count.textContent = `Showing events ${first} to ${offset + list.items.length} of ${total}.`;
      const pages = Math.max(1, Math.ceil(total / limit));
      parts.page.textContent = `Page ${Math.floor(offset / limit) + 1} of ${pages}`;
      parts.previous.disabled = offset === 0;
      parts.next.disabled = offset + limit >= total;
      parts.pager.hidden = total <= limit && offset === 0;
      if (said) say(said);
      // The button used keeps the focus, or its neighbour when it is now disabled.
      if (focus) (focus.disabled ? [parts.previous, parts.next].find((b) => !b.disabled) || parts.refresh : focus).focus();
    }

    const act = (button, to, said) =>
      button.addEventListener("click", async () => {
        button.setAttribute("aria-busy", "true");
        try {
          await load(to(), button, said);
        } catch (error) {
          fail(error);
        } finally {
          button.removeAttribute("aria-busy");
        }
      });
    act(parts.previous, () => Math.max(0, offset - limit));
    act(parts.next, () => offset + limit);
    act(parts.refresh, () => offset, "Activity refreshed.");
    await load(0);
  }

  window.Nimbus = Object.freeze({
    configure,
    $,
    TOKEN_KEY,
    token,
    devices,
    signedIn,
    ApiError,
    request,
    outcome,
    call,
    isChallenge,
    RETRY_IN_DIALOG,
    MESSAGES,
    waitFor,
    explain,
    b64url,
    withIds,
    requestOptions,
    passkeyAssertion,
    credentialJson,
    webauthnError,
    say,
    fail,
    clearMessages,
    when,
    fromUnix,
    element,
    labelled,
    SCOPES,
    scopeNames,
    FACTOR_TYPES,
    confirmIdentity,
    reverified,
    showFieldError,
    clearFieldErrors,
    activityList,
  });
})();
