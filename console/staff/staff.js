// The Nimbus staff console: plain JavaScript, no build step, talking only to the API on the same
// origin (the CSP allows nothing else). Views are <template>s in index.html; this script picks one
// from location.pathname (/console/staff/<view>), so every view has a real URL. What it
// shares with the account console (the API, the session, the dialog...) is in console/common.js.
"use strict";

(() => {
  const BASE = "/console/staff";

  const {
    $, token, ApiError, request, outcome, call, isChallenge, say, fail, clearMessages, when, fromUnix, element,
    labelled, scopeNames, FACTOR_TYPES, confirmIdentity, reverified, devices, signedIn, showFieldError,
    clearFieldErrors, activityList,
  } = window.Nimbus; // console/common.js, shared with the account console
  // Every error in plain words (common.js's MESSAGES); a dead session sends to /console/staff/login.
  window.Nimbus.configure({
    base: BASE,
    explainErrors: true,
    onSessionEnd: (message) => navigate("/login", { error: message }),
  });

  const main = $("#main");

  // ---------------------------------------------------------------------------- staff-only views

  /** Why this session cannot use the staff console, or null when it can. */
  async function refusal() {
    let me;
    try {
      me = await call("GET", "/users/me");
    } catch (error) {
      if (error.explained) throw error;
      return error instanceof ApiError ? error.describe() : String(error);
    }
    if (!me.staff) {
      return `You are logged in as ${me.username}, who is not staff: the staff console is for staff accounts only.`;
    }
    return null;
  }

  // Errors that mean this session cannot use the staff endpoints at all (rather than one failed action).
  const REFUSED = new Set(["ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR", "INSUFFICIENT_PERMISSIONS_ERROR"]);

  async function loginView() {
    const form = $("#login-form");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const username = String(data.get("username")).trim();
      const device = devices.for(username); // the same browser's device, whichever console signed in
      const body = { username, password: String(data.get("password")), device };
      if (!body.username || !body.password) return fail("Give your username (or email) and password.");
      try {
        let reply = await request("POST", "/login", body, { auth: false });
        if (isChallenge(reply)) {
          reply = await confirmIdentity({
            heading: "Second factor",
            purpose: "Your account is protected by a second factor.",
            challenge: reply.body,
            send: (extra) => request("POST", "/login", { device, ...extra }, { auth: false }),
          });
          if (!reply) return say("Login cancelled.");
        }
        await signedIn(outcome(reply), username);
        navigate("/users", { status: "Logged in." });
      } catch (error) {
        fail(error);
      }
    });
  }

  async function refusedView(reason) {
    $("#refused-reason").textContent = reason;
    $("#refused-logout").addEventListener("click", logOut);
  }

  function pageOf() {
    const query = new URLSearchParams(location.search);
    const limit = [5, 10, 25, 50].includes(Number(query.get("limit"))) ? Number(query.get("limit")) : 25;
    const offset = Math.max(0, Math.floor(Number(query.get("offset")) || 0));
    return { limit, offset };
  }

  /** Whether a newer render replaced the page a view began on while it waited for the API: then
   * that view stops, or its handlers would act on the page now shown (another user's). */
  function replaced(page) {
    return main.firstElementChild !== page;
  }

  async function usersView() {
    const { limit, offset } = pageOf();
    const page = main.firstElementChild;
    const list = await call("GET", `/users?offset=${offset}&limit=${limit}`);
    if (replaced(page)) return;
    const rows = list.items.map((user) => {
      const link = element("a", { href: `${BASE}/users/${encodeURIComponent(user.id)}`, textContent: user.username });
      link.dataset.nav = "";
      const state = [user.staff ? "staff" : "", user.bannedAt ? "banned" : "", user.verifiedAt ? "verified" : "unverified"];
      const row = element(
        "tr",
        {},
        element("th", { scope: "row" }, link),
        labelled("Email", user.email),
        labelled("State", state.filter(Boolean).join(", ")),
        labelled("Created", when(user.createdAt)),
      );
      row.dataset.userId = user.id;
      return row;
    });
    $("#users-table tbody").replaceChildren(...rows);
    const first = list.items.length ? offset + 1 : 0;
    $("#users-count").textContent = `Showing users ${first} to ${offset + list.items.length} of ${list.count}.`;
    const pages = Math.max(1, Math.ceil(list.count / limit));
    $("#users-page").textContent = `Page ${Math.floor(offset / limit) + 1} of ${pages}`;
    const select = $("#users-limit");
    select.value = String(limit);
    select.addEventListener("change", () => navigate(`/users?offset=0&limit=${select.value}`, { focus: "users-limit" }));
    const previous = $("#users-previous");
    const next = $("#users-next");
    previous.disabled = offset === 0;
    next.disabled = offset + limit >= list.count;
    previous.addEventListener("click", () =>
      navigate(`/users?offset=${Math.max(0, offset - limit)}&limit=${limit}`, { focus: offset - limit > 0 ? "users-previous" : "users-next" }),
    );
    next.addEventListener("click", () =>
      navigate(`/users?offset=${offset + limit}&limit=${limit}`, { focus: offset + 2 * limit < list.count ? "users-next" : "users-previous" }),
    );
  }

  /** Run a change and show the user's page again with `done`'s message, focus back on `button`. */
  function action(button, run) {
    button.addEventListener("click", async () => {
      try {
        const message = await run();
        if (message === null) return say("Cancelled: nothing changed.");
        await render({ status: message, focus: button.id });
      } catch (error) {
        fail(error);
      }
    });
  }

  async function userView(id) {
    const path = `/users/${encodeURIComponent(id)}`;
    const page = main.firstElementChild;
    // Activity: what the user sees on their own Activity page (STAFF_READ_ACCOUNTS), read beside the
    // rest, so that the page is drawn (and its focus placed) once, with everything on it.
    const [user, sessions, factors] = await Promise.all([
      call("GET", path),
      call("GET", `${path}/sessions?limit=50`),
      call("GET", `${path}/2fa?limit=50`),
      activityList($("#activity"), `${path}/activity`, { limit: 10, isCurrent: () => !replaced(page) }),
    ]);
    if (replaced(page)) return;
    document.title = `${user.username} - Nimbus staff`;
    $("#user-heading").textContent = `User ${user.username}`;
    const details = [
      ["Username", user.username],
      ["Email", user.email],
      ["ID", user.id],
      ["Domain", user.subdomain ? `${user.subdomain}.${user.domain}` : user.domain],
      ["Staff", user.staff ? "yes" : "no"],
      ["Verified", user.verifiedAt ? when(user.verifiedAt) : "no"],
      ["Banned", user.bannedAt ? when(user.bannedAt) : "no"],
      ["Ban reason", user.banReason || ""],
      ["Backup code last used", when(user.twoFactorBackupCodeUsedAt)],
      ["Created", when(user.createdAt)],
      ["Updated", when(user.updatedAt)],
    ];
    $("#user-details").replaceChildren(
      ...details.flatMap(([label, value]) => [element("dt", { textContent: label }), element("dd", { textContent: value ?? "" })]),
    );

    // Sessions: revoking needs no reverification (CONTRACT: the staff session endpoints).
    const rows = sessions.items.map((session, index) => {
      const kind = session.permissionFlags === null ? "Login" : `API key: ${scopeNames(session.permissionFlags)}`;
      const revoke = element("button", { type: "button", className: "danger small", textContent: "Revoke", id: `revoke-${index}` });
      revoke.setAttribute("aria-label", `Revoke ${session.name}`);
      revoke.addEventListener("click", async () => {
        try {
          await call("DELETE", `${path}/sessions/${encodeURIComponent(session.id)}`);
          await render({ status: `Session "${session.name}" revoked.`, focus: "sessions-revoke-all" });
        } catch (error) {
          fail(error);
        }
      });
      const row = element(
        "tr",
        {},
        element("th", { scope: "row", textContent: session.name }),
        labelled("Kind", kind),
        labelled("Last used", when(session.usedAt)),
        labelled("Expires", fromUnix(session.exp)),
        element("td", {}, revoke),
      );
      row.dataset.sessionId = session.id;
      return row;
    });
    $("#sessions-table tbody").replaceChildren(...rows);
    $("#sessions-count").textContent =
      sessions.count > sessions.items.length ? `Showing ${sessions.items.length} of ${sessions.count} sessions.` : `${sessions.count} sessions.`;
    $("#sessions-table").closest(".table-wrap").hidden = !sessions.count;
    const revokeAll = $("#sessions-revoke-all");
    revokeAll.hidden = !sessions.count;
    action(revokeAll, async () => {
      const done = await call("DELETE", `${path}/sessions/all`);
      return `${done.count ?? "All"} sessions of ${user.username} revoked.`;
    });

    // Second factors.
    const list = $("#factors-list");
    if (!factors.items.length) {
      list.replaceChildren(element("li", { textContent: "None." }));
    } else {
      list.replaceChildren(
        ...factors.items.map((factor) => {
          const remove = element("button", { type: "button", className: "danger small", textContent: "Remove" });
          remove.setAttribute("aria-label", `Remove ${factor.name}`);
          remove.addEventListener("click", async () => {
            try {
              const done = await reverified("DELETE", `${path}/2fa/${encodeURIComponent(factor.id)}`, {}, `Remove ${user.username}'s second factor "${factor.name}".`);
              if (!done) return say("Cancelled: nothing changed.");
              await render({ status: `Second factor "${factor.name}" removed.`, focus: "factors-heading" });
            } catch (error) {
              fail(error);
            }
          });
          const label = element("span", {}, element("strong", { textContent: factor.name }), ` ${FACTOR_TYPES[factor.type] || factor.type}, added ${when(factor.createdAt)}, last used ${when(factor.usedAt)}`);
          return element("li", { className: "factor" }, label, remove);
        }),
      );
    }

    // Verification.
    $("#verification-state").textContent = user.verifiedAt ? `Verified on ${when(user.verifiedAt)}.` : `Not verified: ${user.email}.`;
    $("#verify-mark").hidden = Boolean(user.verifiedAt);
    $("#verify-unmark").hidden = !user.verifiedAt;
    $("#verify-resend").hidden = Boolean(user.verifiedAt);
    action($("#verify-mark"), async () =>
      (await reverified("PUT", `${path}/verify`, {}, `Mark ${user.username}'s email address verified.`)) && `${user.username}'s email address is marked verified.`,
    );
    action($("#verify-unmark"), async () =>
      (await reverified("DELETE", `${path}/verify`, {}, `Remove the verified mark of ${user.username}.`)) && `${user.username}'s email address is no longer verified.`,
    );
    $("#verify-resend").addEventListener("click", async () => {
      try {
        await call("GET", `${path}/verify`);
        say(`Verification email sent to ${user.email}.`);
      } catch (error) {
        fail(error);
      }
    });

    // Staff flag.
    $("#staff-state").textContent = user.staff ? `${user.username} is staff.` : `${user.username} is not staff.`;
    $("#staff-promote").hidden = user.staff;
    $("#staff-demote").hidden = !user.staff;
    action($("#staff-promote"), async () =>
      (await reverified("PUT", `${path}/staff`, {}, `Make ${user.username} staff.`)) && `${user.username} is staff now.`,
    );
    action($("#staff-demote"), async () =>
      (await reverified("DELETE", `${path}/staff`, {}, `Remove ${user.username}'s staff rights.`)) && `${user.username} is no longer staff.`,
    );

    // Ban.
    $("#ban-state").textContent = user.bannedAt ? `Banned on ${when(user.bannedAt)}: ${user.banReason || ""}` : "Not banned.";
    const banForm = $("#ban-form");
    banForm.hidden = Boolean(user.bannedAt);
    $("#unban").hidden = !user.bannedAt;
    banForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const reason = banForm.elements.reason.value.trim();
      if (!reason) {
        fail("Give the reason for the ban.");
        banForm.elements.reason.focus();
        return;
      }
      try {
        const done = await reverified("PUT", `${path}/ban`, { reason }, `Ban ${user.username} (every session of theirs is revoked).`);
        if (!done) return say("Cancelled: nothing changed.");
        await render({ status: `${user.username} is banned.`, focus: "unban" });
      } catch (error) {
        fail(error);
      }
    });
    action($("#unban"), async () => (await reverified("DELETE", `${path}/ban`, {}, `Lift ${user.username}'s ban.`)) && `${user.username}'s ban is lifted.`);

    // Password.
    const passwordForm = $("#password-form");
    passwordForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const newPassword = passwordForm.elements.newPassword.value;
      const confirmNewPassword = passwordForm.elements.confirmNewPassword.value;
      if (newPassword.length < 8 || newPassword.length > 64) {
        fail("The new password must have 8 to 64 characters.");
        passwordForm.elements.newPassword.focus();
        return;
      }
      if (newPassword !== confirmNewPassword) {
        fail("The two passwords differ: type the same one twice.");
        passwordForm.elements.confirmNewPassword.focus();
        return;
      }
      clearFieldErrors(passwordForm);
      try {
        const body = { newPassword, confirmNewPassword };
        const done = await reverified("PUT", `${path}/password`, body, `Set ${user.username}'s password (every session of theirs is signed out).`);
        if (!done) return say("Cancelled: nothing changed.");
        passwordForm.reset();
        await render({ status: `${user.username}'s password is set; their sessions are signed out.`, focus: "password-new" });
      } catch (error) {
        fail(error);
        // A password from the breached lists (INSECURE_PASSWORD_ERROR) is said at its field too.
        if (error instanceof ApiError && error.code === "INSECURE_PASSWORD_ERROR") showFieldError(passwordForm, error);
      }
    });

    // Delete.
    $("#user-delete").addEventListener("click", async () => {
      try {
        const done = await reverified("DELETE", path, {}, `Delete ${user.username} for good.`);
        if (!done) return say("Cancelled: nothing changed.");
        await navigate("/users", { status: `${user.username} is deleted.` });
      } catch (error) {
        fail(error);
      }
    });
  }

  function showSwitches(list) {
    const rows = list.items.map((item) => {
      const toggle = element("button", {
        type: "button",
        className: item.state ? "small" : "danger small",
        textContent: item.state ? "Turn off" : "Turn on",
        id: `switch-${item.id}`,
      });
      toggle.setAttribute("aria-label", `${item.state ? "Turn off" : "Turn on"} ${item.name}`);
      toggle.addEventListener("click", async () => {
        try {
          const method = item.state ? "DELETE" : "PUT";
          const purpose = `${item.state ? "Turn off" : "Turn on"} the kill switch ${item.name}.`;
          const fresh = await reverified(method, `/killswitches/${encodeURIComponent(item.id)}`, {}, purpose);
          if (!fresh) return say("Cancelled: nothing changed.");
          showSwitches(fresh);
          say(`Kill switch ${item.name} is ${item.state ? "off" : "on"} (within 10 seconds everywhere).`);
          $(`#switch-${item.id}`).focus();
        } catch (error) {
          fail(error);
        }
      });
      const state = element("td", { textContent: item.state ? "On" : "Off", className: item.state ? "state-on" : "" });
      state.dataset.label = "State";
      const row = element("tr", {}, element("th", { scope: "row", textContent: item.name }), labelled("Number", String(item.id)), state, element("td", {}, toggle));
      row.dataset.switch = item.name;
      return row;
    });
    $("#killswitches-table tbody").replaceChildren(...rows);
  }

  async function operationsView() {
    const page = main.firstElementChild;
    const [switches, level] = await Promise.all([call("GET", "/killswitches"), call("GET", "/loglevel")]);
    if (replaced(page)) return;
    showSwitches(switches);
    $("#killswitches-off").addEventListener("click", async (event) => {
      const button = event.currentTarget;
      try {
        const fresh = await reverified("DELETE", "/killswitches", {}, "Turn off every kill switch.");
        if (!fresh) return say("Cancelled: nothing changed.");
        showSwitches(fresh);
        say("Every kill switch is off (within 10 seconds everywhere).");
        button.focus();
      } catch (error) {
        fail(error);
      }
    });
    const showLevel = (name) => {
      $("#loglevel-state").textContent = `The log level is ${name}.`;
      $("#loglevel-name").value = name.toUpperCase();
    };
    showLevel(level.name);
    $("#loglevel-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const name = $("#loglevel-name").value;
      try {
        const done = await reverified("PATCH", "/loglevel", { name }, `Set the log level to ${name}.`);
        if (!done) return say("Cancelled: nothing changed.");
        showLevel(done.name || name);
        say(`The log level is ${done.name || name} now (within 10 seconds everywhere).`);
      } catch (error) {
        fail(error);
      }
    });
  }

  // ----------------------------------------------------------------------------------- routing

  const VIEWS = {
    login: { template: "view-login", title: "Staff log in", run: loginView, guest: true },
    users: { template: "view-users", title: "Users", run: usersView },
    user: { template: "view-user", title: "User", run: userView },
    operations: { template: "view-operations", title: "Kill switches and log level", run: operationsView },
  };

  /** The view name and its argument (a user id) of the current URL. */
  function currentView() {
    const rest = location.pathname.replace(/^\/console\/staff\/?/, "").replace(/\/+$/, "");
    if (!rest) return { name: token.get() ? "users" : "login" };
    const user = /^users\/([^/]+)$/.exec(rest);
    // "me" names the caller's own routes (/users/me/...), not a user's page: no page acts on it.
    if (user && decodeURIComponent(user[1]) !== "me") return { name: "user", argument: decodeURIComponent(user[1]) };
    return { name: rest };
  }

  function show(name, templateId, title) {
    const template = document.getElementById(templateId);
    main.replaceChildren(template.content.cloneNode(true));
    document.title = `${title} - Nimbus staff`;
    main.dataset.view = name;
  }

  /** Show the view of the current URL; `status` / `error` are announced once it is on screen;
   * `focus` names an element to focus afterwards (the button that was used), else the heading. */
  async function render({ status, error, focus } = {}) {
    let { name, argument } = currentView();
    const loggedIn = Boolean(token.get());
    let view = VIEWS[name];
    if (view && !view.guest && !loggedIn) {
      history.replaceState(null, "", `${BASE}/login`);
      name = "login";
    } else if (view && view.guest && loggedIn) {
      history.replaceState(null, "", `${BASE}/users`);
      name = "users";
    }
    view = VIEWS[name];
    $("#nav").hidden = !loggedIn;
    for (const link of document.querySelectorAll("#nav a[data-nav]")) {
      const here = link.pathname === `${BASE}/${name === "user" ? "users" : name}`;
      if (here) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    clearMessages();
    main.setAttribute("aria-busy", "true");
    try {
      // A staff view: first make sure this session is staff's, so others get a clear refusal.
      const refused = view && !view.guest ? await refusal() : null;
      if (refused) {
        show("refused", "view-refused", "Staff only");
        await refusedView(refused);
      } else {
        show(view ? name : "missing", view ? view.template : "view-missing", view ? view.title : "Not found");
        if (status) say(status);
        if (error) fail(error);
        if (view) {
          try {
            await view.run(argument);
          } catch (failure) {
            if (failure instanceof ApiError && REFUSED.has(failure.code)) {
              show("refused", "view-refused", "Staff only");
              await refusedView(failure.describe());
            } else {
              fail(failure);
            }
          }
        }
      }
    } catch (failure) {
      fail(failure);
    } finally {
      main.removeAttribute("aria-busy");
    }
    const target = (focus && document.getElementById(focus)) || $("h1", main);
    if (target && !target.hidden) {
      if (target.tagName === "H1") target.tabIndex = -1;
      target.focus({ preventScroll: target.tagName === "H1" });
    } else {
      const heading = $("h1", main);
      if (heading) {
        heading.tabIndex = -1;
        heading.focus({ preventScroll: true });
      }
    }
  }

  function navigate(path, messages) {
    history.pushState(null, "", `${BASE}${path}`);
    return render(messages);
  }

  async function logOut() {
    try {
      await request("DELETE", "/users/me/sessions/me");
    } finally {
      token.clear();
      navigate("/login", { status: "Logged out." });
    }
  }

  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[data-nav]");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
    event.preventDefault();
    navigate((link.pathname.replace(BASE, "") || "/") + link.search);
  });
  window.addEventListener("popstate", () => render());
  $("#logout").addEventListener("click", logOut);

  render();
})();
