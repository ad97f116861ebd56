// What every script of tests/openai_node/ shares (tests/openai_node_test.py copies them
// together): the official client on the daemon's door (argv: base URL, key, a rate-limited
// tenant's key), checks that print one line each, errors checked by class and status, and
// a plain POST for pagoda's own routes (/tokenize, /detokenize, ...).
import OpenAI from 'openai';

export const [baseURL, key, limitedKey] = process.argv.slice(2);
export const origin = baseURL.replace(/\/v1$/, '');
export const model = 'stories260K';
export const client = new OpenAI({baseURL, apiKey: key, maxRetries: 0, timeout: 60000});
let failures = 0;

export function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
}

export async function expectError(cls, status, what, call, extra = () => true) {
  try {
    await call();
    check(false, `${what}: no error`);
  } catch (e) {
    check(e instanceof cls && e.status === status && extra(e),
          `${what}: ${e.constructor.name} ${e.status} ${e.code ?? ''} ${e.message}`);
  }
}

export async function post(path, body) {
  const r = await fetch(origin + path, {
    method: 'POST',
    headers: {'Authorization': `Bearer ${key}`, 'Content-Type': 'application/json'},
    body: JSON.stringify(body),
  });
  return r.json();
}

// Prints the count and exits with it (the test's status).
export function finish() {
  console.log(`${failures} failed`);
  process.exit(failures);
}
