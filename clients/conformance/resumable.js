#!/usr/bin/env node
// A resumable upload that fails part-way and is resumed part-way, through the
// official Node client: 9 MiB uploaded with `file.save({resumable: true})`, in
// 2 MiB chunks and in one streamed request, under the retry test instruction
// `return-503-after-8192K` (the server keeps the session's first 8 MiB and
// answers 503). The client must ask the session where it stands (308 with
// `Range: bytes=0-8388607`) and send only what is missing: the next data request
// starts at byte 8388608. The object's bytes are read back and compared, and the
// retry test must be completed.
//
//   node resumable.js --endpoint http://127.0.0.1:4443
//
// The requests are recorded where the client sends them (the gaxios instance
// @google-cloud/storage uploads with, wrapped for the duration); run.js runs this
// after the scenarios.

'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const path = require('node:path');
const {Storage} = require('@google-cloud/storage');

const SIZE = 9 * 1024 * 1024;
const FAIL_AFTER = 8192 * 1024;

// The gaxios module the storage library sends uploads with.
function librarysGaxios() {
  const storageDir = path.dirname(require.resolve('@google-cloud/storage'));
  return require(require.resolve('gaxios', {paths: [storageDir]}));
}

// Runs `body` while every request the library sends through gaxios is recorded
// as `{method, range, status, answered}`.
async function recording(body) {
  const gaxios = librarysGaxios();
  const original = gaxios.request;
  const log = [];
  gaxios.request = async opts => {
    const headers = opts.headers || {};
    const entry = {method: opts.method, range: headers['Content-Range'] || headers['content-range'] || ''};
    log.push(entry);
    try {
      const res = await original.call(gaxios, opts);
      Object.assign(entry, {status: res.status, answered: (res.headers && res.headers.range) || ''});
      return res;
    } catch (e) {
      entry.status = e.status || (e.response && e.response.status) || e.code;
      throw e;
    }
  };
  try {
    await body();
  } finally {
    gaxios.request = original;
  }
  return log;
}

async function json(url, init) {
  const res = await fetch(url, init);
  if (!res.ok) throw new Error(`${init ? init.method : 'GET'} ${url}: ${res.status} ${await res.text()}`);
  return res.json();
}

// Checks the recorded requests: a data request failed with 503 once the session
// held 8 MiB, a status query then answered 308 with the first 8 MiB, and the next
// data request started at byte 8388608. A line describing it.
function checkResumedPartWay(log) {
  const failed = log.findIndex(e => e.status === 503 && e.range && !e.range.startsWith('bytes */'));
  assert.ok(failed >= 0, 'no data request failed with 503');
  const query = log.findIndex((e, i) => i > failed && e.range.startsWith('bytes */'));
  assert.ok(query > failed, 'no status query after the 503');
  assert.equal(log[query].status, 308);
  assert.equal(log[query].answered, `bytes=0-${FAIL_AFTER - 1}`);
  const resumed = log.find((e, i) => i > query && e.range && !e.range.startsWith('bytes */'));
  assert.ok(resumed, 'no data request after the status query');
  assert.ok(resumed.range.startsWith(`bytes ${FAIL_AFTER}-`), `resumed with ${resumed.range}`);
  assert.equal(resumed.status, 200);
  const shown = log.slice(failed).map(e => `${e.method} ${e.range} -> ${e.status}${e.answered ? ` ${e.answered}` : ''}`);
  return shown.join(' | ');
}

// One upload under the instruction; true when it resumed part-way with the
// right bytes.
async function upload(endpoint, project, retry, chunkSize) {
  const mode = chunkSize ? '2 MiB chunks' : 'one streamed request';
  const test = await json(`${endpoint}/retry_test`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({instructions: {'storage.objects.insert': ['return-503-after-8192K']}}),
  });
  const storage = new Storage({apiEndpoint: endpoint, projectId: project, retryOptions: retry});
  storage.interceptors.push({
    request: reqOpts => {
      reqOpts.headers = {...(reqOpts.headers || {}), 'x-retry-test-id': test.id};
      return reqOpts;
    },
  });
  const plain = new Storage({apiEndpoint: endpoint, projectId: project});
  const bucket = `resumable-demo-${Date.now().toString(36)}-${chunkSize ? 'chunks' : 'stream'}`;
  await plain.createBucket(bucket);
  const data = crypto.randomBytes(SIZE);
  try {
    const log = await recording(() =>
      storage.bucket(bucket).file('nine-mib').save(data, {
        resumable: true,
        ...(chunkSize ? {chunkSize} : {}),
        preconditionOpts: {ifGenerationMatch: 0},
      }),
    );
    const shown = checkResumedPartWay(log);
    const [back] = await plain.bucket(bucket).file('nine-mib').download();
    assert.ok(back.equals(data), `${back.length} bytes read back differ from the ${SIZE} written`);
    const state = await json(`${endpoint}/retry_test/${test.id}`);
    assert.equal(state.completed, true, `retry test ${test.id} not completed`);
    const md5 = crypto.createHash('md5').update(data).digest('base64');
    console.log(`ok   resumable upload (Node, ${mode}): ${shown}`);
    console.log(`     resumed at byte ${FAIL_AFTER} of ${SIZE}; the ${SIZE} bytes read back are the ones written (md5 ${md5})`);
    return true;
  } catch (e) {
    console.log(`FAIL resumable upload (Node, ${mode}): ${e.message}`);
    return false;
  }
}

// Both uploads; true when both passed.
async function demonstrate(endpoint, project, retry) {
  console.log(`resumable upload of ${SIZE} bytes failing once the session holds ${FAIL_AFTER} (return-503-after-8192K):`);
  const chunked = await upload(endpoint, project, retry, 2 * 1024 * 1024);
  const streamed = await upload(endpoint, project, retry, undefined);
  return chunked && streamed;
}

module.exports = {demonstrate};

if (require.main === module) {
  const i = process.argv.indexOf('--endpoint');
  const endpoint = (i > 0 ? process.argv[i + 1] : process.env.STORAGE_EMULATOR_HOST || '').replace(/\/$/, '');
  if (!endpoint) {
    console.error('usage: node resumable.js --endpoint URL');
    process.exit(2);
  }
  demonstrate(endpoint, 'fake-project', {retryDelayMultiplier: 1.1, maxRetryDelay: 1})
    .then(ok => (process.exitCode = ok ? 0 : 1))
    .catch(e => {
      console.error(e);
      process.exitCode = 2;
    });
}
