// Drives the published client library, cumulonimbus-wrapper 5.1.0 (node_modules, pinned by
// package-lock.json), against a running Nimbus API. Used by tests/e2e/test_client_library.py.
//
//   node flows.mjs <flow> '<json arguments>'
//
// The arguments always carry `api` (the base URL) and `ip` (a loopback source address: Nimbus
// counts its rate limits per source IP, and every test uses its own, as the Python client does).
// Each flow runs a few library calls in order and prints one JSON line per call:
//   {"step": "...", "ok": true,  "detail": <what the library resolved to>}
//   {"step": "...", "ok": false, "detail": <the error the library threw, serialised>}
// "ok" only says whether the library call resolved; whether that was the right outcome is for the
// test to judge, so the expectations live in one place (the Python test). Inputs the library cannot
// produce (the emailed verification token, TOTP codes, staff rights) come from the test.
// Exit status 0: the flow ran to its end; 1: a step the rest depended on failed (the steps run so
// far are printed); 2: bad usage.

import Cumulonimbus from 'cumulonimbus-wrapper';

/** Print one step's outcome. */
function report(step, ok, detail) {
  process.stdout.write(JSON.stringify({ step, ok, detail }) + '\n');
}

/** What a thrown value looked like: the library's error class and every field it copied. */
function describeError(error) {
  if (error instanceof Cumulonimbus.ResponseError) {
    // ResponseError copies the API's error body onto itself (code, message, fields, token, ...).
    const { ratelimit, ...body } = error;
    return { class: error.constructor.name, ...body, ratelimit };
  }
  return { class: error?.constructor?.name ?? typeof error, message: String(error?.message ?? error) };
}

/** What a resolved value looked like: an APIResponse's body and rate-limit headers, or a client. */
function describeResult(value) {
  if (value instanceof Cumulonimbus) return { token: value.token };
  if (value && typeof value === 'object' && 'result' in value && 'response' in value) {
    return { status: value.response.status, result: value.result, ratelimit: value.ratelimit };
  }
  return value;
}

class StepFailed extends Error {}

/** Run one library call as a named step; answers {ok, value | error} and prints the line. */
async function step(name, call) {
  try {
    const value = await call();
    report(name, true, describeResult(value));
    return { ok: true, value };
  } catch (error) {
    report(name, false, describeError(error));
    return { ok: false, error };
  }
}

/** Like step(), for a call the rest of the flow builds on: stop the flow if it fails. */
async function required(name, call) {
  const outcome = await step(name, call);
  if (!outcome.ok) throw new StepFailed(name);
  return outcome.value;
}

/**
 * A reverified call as the library's users write it: first with the password; if the API answers
 * with a second-factor challenge (the library throws SecondFactorChallengeRequiredError carrying
 * the challenge token), the same call again with `{token, type, code}` from the test.
 */
async function reverified(name, call, password, answer) {
  const first = await step(name, () => call(password));
  const challenged = !first.ok && first.error instanceof Cumulonimbus.SecondFactorChallengeRequiredError;
  if (!challenged || !answer) return first;
  return step(`${name}-2fa`, () => call({ token: first.error.token, ...answer }));
}

/**
 * Send every request of this process from `ip`. The library calls the global fetch(), which Node
 * implements with its bundled undici; undici reads its dispatcher from this documented global
 * symbol (the one undici's setGlobalDispatcher() sets), and its Agent takes `localAddress`. The
 * Agent class is taken from the dispatcher Node installs on its first fetch (a data: URL, no
 * request), as Node does not export undici itself.
 */
async function useSourceAddress(ip) {
  await fetch('data:,');
  const key = Symbol.for('undici.globalDispatcher.1');
  const Agent = globalThis[key]?.constructor;
  if (typeof Agent !== 'function' || Agent.name !== 'Agent') {
    throw new Error(`cannot bind source address ${ip}: Node's fetch has no undici Agent`);
  }
  globalThis[key] = new Agent({ localAddress: ip });
}

const flows = {
  /** Register (the library's static register), read the new account and the API status. */
  async register({ api, username, email, password }) {
    const client = await required('register', () =>
      Cumulonimbus.register(username, email, password, password, false, { baseURL: api }),
    );
    await step('self', () => client.getSelf());
    await step('session', () => client.getSelfSession());
    await step('status', () => client.getAPIStatus());
  },

  /** Verify the email address with the emailed token, then try the same token again. */
  async verify({ api, session, verification }) {
    const client = new Cumulonimbus(session, { baseURL: api });
    await step('verify', () => client.verifyEmail(verification));
    await step('self', () => client.getSelf());
    await step('verify-again', () => client.verifyEmail(verification));
  },

  /** Start TOTP enrolment (reverified with the password); the test derives a code from the secret. */
  async 'totp-begin'({ api, session, password }) {
    const client = new Cumulonimbus(session, { baseURL: api });
    await step('totp-begin', () => client.beginTOTPRegistration(password));
  },

  /** Confirm TOTP enrolment with a code the test computed. */
  async 'totp-confirm'({ api, session, token, name, code }) {
    const client = new Cumulonimbus(session, { baseURL: api });
    await step('totp-confirm', () => client.confirmTOTPRegistration(token, name, code));
  },

  /**
   * Log in with the password; when challenged, optionally answer first with a wrong code, then
   * with `answer` ({type, code}); read the account and the new session through the new client.
   */
  async login({ api, username, password, rememberMe = false, wrong, answer }) {
    const options = { baseURL: api };
    const login = (secret) => Cumulonimbus.login(username, secret, rememberMe, options);
    const first = await step('login', () => login(password));
    let outcome = first;
    const challenge = first.ok ? null : first.error;
    if (challenge instanceof Cumulonimbus.SecondFactorChallengeRequiredError) {
      if (wrong) await step('login-2fa-wrong', () => login({ token: challenge.token, ...wrong }));
      if (answer) outcome = await step('login-2fa', () => login({ token: challenge.token, ...answer }));
    }
    if (!outcome.ok) return;
    await step('self', () => outcome.value.getSelf());
    await step('session', () => outcome.value.getSelfSession('me'));
  },

  /** Read the account with a token (normal or scoped): what a client holding it sees. */
  async self({ api, session }) {
    await step('self', () => new Cumulonimbus(session, { baseURL: api }).getSelf());
  },

  /** List sessions as index.d.ts documents it, options left out, then with options. */
  async list({ api, session }) {
    const client = new Cumulonimbus(session, { baseURL: api });
    await step('list-without-options', () => client.getSelfSessions());
    await step('list-with-options', () => client.getSelfSessions({}));
  },

  /**
   * List sessions, then revoke `others` three ways (one, a list, "all but mine") and finally all,
   * this one included, as a user cleaning up their devices does.
   */
  async sessions({ api, session, others }) {
    const client = new Cumulonimbus(session, { baseURL: api });
    const ids = [];
    for (const [i, token] of others.entries()) {
      const other = new Cumulonimbus(token, { baseURL: api });
      ids.push((await required(`other-${i}`, () => other.getSelfSession())).result.id);
    }
    await step('list', () => client.getSelfSessions({ limit: 50, offset: 0 }));
    await step('list-page', () => client.getSelfSessions({ limit: 1, offset: 1 }));
    await step('current', () => client.getSelfSession());
    await step('revoke-one', () => client.deleteSelfSession(ids[0]));
    await step('revoked-one-refused', () => new Cumulonimbus(others[0], { baseURL: api }).getSelf());
    await step('revoke-list', () => client.deleteSelfSessions([ids[1]]));
    await step('revoke-all-but-mine', () => client.deleteAllSelfSessions());
    await step('list-after', () => client.getSelfSessions({}));
    await step('revoke-all-with-mine', () => client.deleteAllSelfSessions(true));
    await step('self-after', () => client.getSelf());
  },

  /**
   * Create a scoped session (reverified: password, or the challenge answered with `answer`) and use
   * it: inside its scopes, outside them, for what scoped sessions may never do; then revoke it.
   */
  async scoped({ api, session, password, answer, name, permissionFlags, longLived }) {
    const owner = new Cumulonimbus(session, { baseURL: api });
    const created = await reverified(
      'create',
      (secret) => owner.createScopedSession(name, permissionFlags, secret, longLived),
      password,
      answer,
    );
    if (!created.ok) return;
    const { token, id } = created.value.result;
    const scoped = new Cumulonimbus(token, { baseURL: api });
    await step('scoped-self', () => scoped.getSelf());
    await step('scoped-sessions', () => scoped.getSelfSessions({}));
    await step('scoped-out-of-scope', () => scoped.editSelfUsername(`${name}-x`, password ?? 'unused'));
    await step('scoped-create', () => scoped.createScopedSession(name, permissionFlags, 'unused'));
    await step('scoped-delete-account', () => scoped.deleteSelf('unused'));
    await step('owner-sessions', () => owner.getSelfSessions({}));
    await step('revoke', () => owner.deleteSelfSession(id));
    await step('scoped-after-revoke', () => scoped.getSelf());
  },

  /** A staff member bans a user (reverified), then reads the user back. */
  async ban({ api, session, password, answer, user, reason }) {
    const staff = new Cumulonimbus(session, { baseURL: api });
    const banned = await reverified('ban', (secret) => staff.banUser(user, reason, secret), password, answer);
    if (banned.ok) await step('user', () => staff.getUser(user));
  },
};

async function main() {
  const [name, json] = process.argv.slice(2);
  const flow = flows[name];
  if (!flow || json === undefined) {
    process.stderr.write(`usage: node flows.mjs <${Object.keys(flows).join('|')}> '<json>'\n`);
    return 2;
  }
  const args = JSON.parse(json);
  if (args.ip) await useSourceAddress(args.ip);
  try {
    await flow(args);
  } catch (error) {
    if (error instanceof StepFailed) return 1;
    throw error;
  }
  return 0;
}

process.exitCode = await main();
