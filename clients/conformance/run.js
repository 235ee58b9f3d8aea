#!/usr/bin/env node
// The retry conformance scenarios (scenarios.json: Google's retry_tests.json)
// driven through the official Node client against a server that speaks the
// storage-testbench's /retry_test API: fake-gcs, or storage-testbench itself.
//
//   node run.js --endpoint http://127.0.0.1:4443 [--jobs 4] [--only 1,2] [--grep text] [--list]
//
// For every scenario x case x method, and every library call calls.js maps the
// method to, one case:
//   1. the resources the method needs are made without the header (a bucket, an
//      object, a notification, an HMAC key; each case has its own);
//   2. a retry test is created: POST /retry_test {"instructions": {method: case}};
//   3. the call runs on a client that sends `x-retry-test-id` on every request
//      (an interceptor), with the scenario's preconditions when it provides them;
//   4. it must succeed or fail as the scenario expects, a call that had to
//      succeed is checked (bytes read back, metadata changed), and
//      GET /retry_test/{id} must say `completed: true` (every instruction used).
// Scenario 7's uploads run one at a time after the rest (a client error the
// library throws outside the call's promise is then the case's), every case
// within 120 s. Then the resumable-upload demonstration (resumable.js): a 9 MiB
// upload that fails once the session holds 8 MiB and is resumed part-way.
// The last line is `passed N of M; left out: K` followed by each method or case
// left out and why; the exit status is 1 when a case failed. `--list` prints the
// cases.

'use strict';

const {Storage} = require('@google-cloud/storage');
const {source: SOURCE, retryTests: SCENARIOS} = require('./scenarios.json');
const {CALLS, ELSEWHERE, SKIPPED} = require('./calls.js');
const {demonstrate} = require('./resumable.js');

const PROJECT = 'fake-project';
const RUN = `${Date.now().toString(36)}${process.pid.toString(36)}`;
// Quick retries: the scenarios inject up to two faults per call. (The upload
// path's retry library needs maxRetryDelay of at least its 1 s minimum.)
const RETRY = {retryDelayMultiplier: 1.1, maxRetryDelay: 1, totalTimeout: 60};

function options(argv) {
  const flags = {jobs: '4'};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--list') flags.list = true;
    else if (arg.startsWith('--') && i + 1 < argv.length) flags[arg.slice(2)] = argv[++i];
    else throw new Error(`unknown argument ${JSON.stringify(arg)}; see the comment at the top of run.js`);
  }
  const endpoint = (flags.endpoint || process.env.STORAGE_EMULATOR_HOST || '').replace(/\/$/, '');
  if (!endpoint && !flags.list) throw new Error('--endpoint URL (or STORAGE_EMULATOR_HOST) is required');
  return {
    endpoint,
    jobs: Math.max(1, Number(flags.jobs)),
    only: (flags.only || '').split(',').filter(Boolean).map(Number),
    grep: flags.grep || '',
    list: Boolean(flags.list),
  };
}

// Every case, and what is left out (with why).
function plan(opts) {
  const cases = [];
  const leftOut = new Map();
  const leave = (what, reason, scenario, via) => {
    const entry = leftOut.get(what) || {reason, count: 0, scenarios: new Set(), calls: new Set()};
    entry.count += 1;
    entry.scenarios.add(scenario.id);
    if (via) entry.calls.add(via);
    leftOut.set(what, entry);
  };
  for (const scenario of SCENARIOS) {
    if (opts.only.length && !opts.only.includes(scenario.id)) continue;
    scenario.cases.forEach(({instructions}, index) => {
      const list = instructions.join(', ');
      for (const method of scenario.methods) {
        const key = method.group || method.name;
        const calls = CALLS[key];
        if (!calls) {
          leave(`${key}`, ELSEWHERE[key] || 'no call in calls.js', scenario);
          continue;
        }
        for (const call of calls) {
          const name = `S${scenario.id}/${index}/${method.name}/${call.via} [${list}]`;
          if (opts.grep && !name.includes(opts.grep)) continue;
          const skipped = SKIPPED.find(s => s.method === key && s.instructions.join(', ') === list);
          if (skipped) {
            leave(`${key} [${list}]`, skipped.reason, scenario, call.via);
            continue;
          }
          const combination = `S${scenario.id}/${index}/${method.name}`;
          cases.push({name, scenario, instructions, method, call, combination, serial: scenario.id === 7});
        }
      }
    });
  }
  return {cases, leftOut};
}

let made = 0;
function fresh(kind) {
  made += 1;
  return `conf-${RUN}-${kind}-${made}`;
}

// The resources `method` needs, made on `plain` (no header); the case's context.
async function setUp(opts, plain, c) {
  const ctx = {plain, pre: c.scenario.preconditionProvided, fresh, newName: fresh('new')};
  const needs = new Set(c.method.resources);
  if (needs.has('BUCKET') || needs.has('OBJECT') || needs.has('NOTIFICATION')) {
    ctx.bucketName = fresh('bucket');
    const [, metadata] = await plain.createBucket(ctx.bucketName);
    ctx.bucketMetageneration = Number(metadata.metageneration);
  }
  if (needs.has('OBJECT')) {
    ctx.objectName = fresh('object');
    ctx.objectText = `hello conformance ${ctx.objectName}`;
    const file = plain.bucket(ctx.bucketName).file(ctx.objectName);
    await file.save(ctx.objectText, {resumable: false});
    ctx.generation = Number(file.metadata.generation);
    ctx.metageneration = Number(file.metadata.metageneration);
  }
  if (needs.has('NOTIFICATION')) {
    const [notification] = await plain.bucket(ctx.bucketName).createNotification('conformance-fixture');
    ctx.notificationId = notification.id;
  }
  if (needs.has('HMAC_KEY')) {
    const [key] = await plain.createHmacKey(`sa-${fresh('key')}@fake-project.iam.gserviceaccount.com`);
    ctx.accessId = key.metadata.accessId;
    ctx.hmacEtag = key.metadata.etag;
  }
  if (c.call.prepare) await c.call.prepare(ctx);
  return ctx;
}

async function retryTest(opts, method, instructions) {
  const res = await fetch(`${opts.endpoint}/retry_test`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({instructions: {[method]: instructions}}),
  });
  if (!res.ok) throw new Error(`POST /retry_test: ${res.status} ${await res.text()}`);
  return (await res.json()).id;
}

async function retryTestState(opts, id) {
  const res = await fetch(`${opts.endpoint}/retry_test/${id}`);
  if (!res.ok) throw new Error(`GET /retry_test/${id}: ${res.status} ${await res.text()}`);
  return res.json();
}

// A client whose every request carries `x-retry-test-id: id`.
function clientFor(opts, id, callOptions = {}) {
  const storage = new Storage({
    apiEndpoint: opts.endpoint,
    projectId: PROJECT,
    ...callOptions,
    retryOptions: {...RETRY, ...(callOptions.retryOptions || {})},
  });
  storage.interceptors.push({
    request: reqOpts => {
      reqOpts.headers = {...(reqOpts.headers || {}), 'x-retry-test-id': id};
      return reqOpts;
    },
  });
  return storage;
}

// Runs one case; the problems found (none: it passed).
async function runCase(opts, c) {
  const plain = new Storage({apiEndpoint: opts.endpoint, projectId: PROJECT});
  const ctx = await setUp(opts, plain, c);
  const id = await retryTest(opts, c.method.name, c.instructions);
  const storage = clientFor(opts, id, c.call.client);
  Object.assign(ctx, {storage});
  if (ctx.bucketName) ctx.bucket = storage.bucket(ctx.bucketName);
  if (ctx.objectName) ctx.file = ctx.bucket.file(ctx.objectName);
  if (ctx.notificationId) ctx.notification = ctx.bucket.notification(ctx.notificationId);
  if (ctx.accessId) ctx.hmacKey = storage.hmacKey(ctx.accessId);
  let error = null;
  try {
    await c.call.run(ctx);
  } catch (e) {
    error = e;
  }
  const problems = [];
  const expected = c.scenario.expectSuccess;
  if (expected && error) problems.push(`expected success, got ${describe(error)}`);
  if (!expected && !error) problems.push('expected a failure, but the call succeeded');
  if (expected && !error && c.call.verify) {
    try {
      await c.call.verify(ctx);
    } catch (e) {
      problems.push(`succeeded, but ${describe(e)}`);
    }
  }
  const state = await retryTestState(opts, id);
  if (state.completed !== true) {
    problems.push(`retry test ${id} not completed; left: ${JSON.stringify(state.instructions)}`);
  }
  return problems;
}

function describe(e) {
  const code = e && e.code !== undefined ? `${e.code} ` : '';
  return `${code}${(e && e.message) || e}`.split('\n')[0].slice(0, 300);
}

const CASE_TIMEOUT_MS = 120_000;

// An error the client library raised outside any promise (an 'error' event
// nobody listens to) while a serial case runs fails that case.
let uncaught = null;
process.on('uncaughtException', e => {
  if (!uncaught) throw e;
  uncaught(e);
});

// Runs one case within the time limit; its problems.
async function guarded(opts, c) {
  let timer;
  const limit = new Promise(resolve => {
    timer = setTimeout(() => resolve([`no answer within ${CASE_TIMEOUT_MS / 1000} s`]), CASE_TIMEOUT_MS);
  });
  const thrown = new Promise(resolve => {
    if (c.serial) uncaught = e => resolve([`the client threw outside the call: ${describe(e)}`]);
  });
  const run = runCase(opts, c).catch(e => [`could not run: ${describe(e)}`]);
  try {
    return await Promise.race([run, limit, thrown]);
  } finally {
    clearTimeout(timer);
    if (c.serial) uncaught = null;
  }
}

// Runs `cases` `jobs` at a time (serial ones after, one at a time); the failures.
async function runAll(opts, cases) {
  const failures = [];
  let done = 0;
  const report = (c, problems) => {
    done += 1;
    if (problems.length) {
      failures.push({c, problems});
      console.log(`FAIL ${c.name}\n     ${problems.join('\n     ')}`);
    } else if (process.env.CONFORMANCE_VERBOSE) {
      console.log(`ok   ${c.name}`);
    }
    if (done % 50 === 0) console.log(`... ${done} of ${cases.length}`);
  };
  const parallel = cases.filter(c => !c.serial);
  let next = 0;
  async function worker() {
    while (next < parallel.length) {
      const c = parallel[next++];
      report(c, await guarded(opts, c));
    }
  }
  await Promise.all(Array.from({length: opts.jobs}, worker));
  for (const c of cases.filter(c => c.serial)) report(c, await guarded(opts, c));
  return failures;
}

// How many scenario x case x method combinations every call of passed, of those
// this run planned, and how many are left out whole.
function combinations(cases, failures, leftOut) {
  const failed = new Set(failures.map(f => f.c.combination));
  const run = new Set(cases.map(c => c.combination));
  const passed = [...run].filter(k => !failed.has(k)).length;
  const total = SCENARIOS.reduce((n, s) => n + s.cases.length * s.methods.length, 0);
  const whole = [...leftOut.values()].filter(e => !e.calls.size).reduce((n, e) => n + e.count, 0);
  const partly = [...leftOut.values()].filter(e => e.calls.size).length;
  return `scenario x case x method: ${passed} of ${total} passed through the Node client` +
    ` (${whole} left out whole, ${partly} with every call left out; see below)`;
}

function summary(cases, failures, leftOut) {
  const notes = new Map();
  for (const c of cases) if (c.call.note) notes.set(c.call.via, c.call.note);
  if (notes.size) {
    console.log('calls that are not the plain library method (each case still passed or failed on its own):');
    for (const [via, note] of notes) console.log(`  ${via}: ${note}`);
  }
  const left = [...leftOut].map(([key, e]) => {
    const calls = e.calls.size ? `; ${[...e.calls].join(', ')}` : '';
    return `${key} (scenario ${[...e.scenarios].join(', ')}, ${e.count} case(s)${calls}): ${e.reason}`;
  });
  const leftCount = [...leftOut.values()].reduce((n, e) => n + e.count, 0);
  console.log(`scenarios: ${SOURCE}`);
  if (!process.argv.includes('--only') && !process.argv.includes('--grep')) {
    console.log(combinations(cases, failures, leftOut));
  }
  console.log(
    `passed ${cases.length - failures.length} of ${cases.length}; left out: ${leftCount}` +
      (left.length ? `\n  ${left.join('\n  ')}` : ''),
  );
}

async function main() {
  const opts = options(process.argv.slice(2));
  const {cases, leftOut} = plan(opts);
  if (opts.list) {
    for (const c of cases) console.log(c.name);
    return;
  }
  console.log(`${cases.length} cases against ${opts.endpoint}, ${opts.jobs} at a time`);
  const failures = await runAll(opts, cases);
  let demoFailed = false;
  if (!opts.only.length && !opts.grep) {
    demoFailed = !(await demonstrate(opts.endpoint, PROJECT, RETRY));
  }
  summary(cases, failures, leftOut);
  process.exitCode = failures.length || demoFailed ? 1 : 0;
}

main().catch(e => {
  console.error(e);
  process.exitCode = 2;
});
