#!/usr/bin/env node
// One writer of the torture run (docs/torture.md): uploads objects of unique hard
// names, sizes from 0 bytes to several MiB and attributes through the official Node
// client, @google-cloud/storage (clients/node's pinned install), in a loop until its
// standard input closes; then it finishes the upload in progress and exits 0.
//
//   node writer.js --endpoint http://127.0.0.1:PORT --bucket bkt --log FILE \
//       --writer node-0 --seed 7 [--max-bytes 6291456] [--kinds media,multipart,resumable]
//
// The client is configured as clients/node/check.js configures it, with its default
// retries (what users run); every write carries ifGenerationMatch=0, as
// docs/relay.md asks. Kinds, as check.js uses them:
//
//   media      storage.request, POST uploadType=media (content type only)
//   multipart  file.save(data, {resumable: false, metadata})
//   resumable  file.save(data, {resumable: true, chunkSize: 256 KiB x k (k of 1, 2, 4, 8: a 2 MiB chunk is more than one of the relay's 1 MiB pieces, so one broken off mid-body leaves bytes behind), metadata}):
//              at least two chunks; the client validates the crc32c
//
// The log gets one JSON line before each upload (`ev: "begin"`: writer, seq, kind,
// name, size, md5 and crc32c in base64, contentType, cacheControl, metadata) and one
// after it (`ev: "end"`: answer `ok` when the client call resolved, else `error` with
// the error's text and code, and the milliseconds it took), each appended at once,
// all with `t`, the wall-clock time in milliseconds since the Unix epoch. An
// exception the client throws outside the promise of an upload is logged as
// `ev: "uncaught"` (and fails the upload in progress). A failed upload's end line
// also has `lastStatusQuery`: what the client's last resumable status query got
// (answered, status and range; or the error it failed with), or null. Every
// connection refused (ECONNREFUSED) is logged as it happens as `ev: "refused"`
// (writer, seq of the upload in progress, the error's text): the client retries a
// refused request itself, so the upload's end line may say `ok` all the same.

'use strict';

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const {createRequire} = require('node:module');

// The client from clients/node (npm ci there), whatever the working directory.
const requireClient = createRequire(path.join(__dirname, '..', 'node', 'package.json'));
const {Storage, CRC32C} = requireClient('@google-cloud/storage');

// What the last status query of the upload in progress got (`PUT bytes */*`, which
// the client sends to learn the offset after a failed chunk): observed, not changed.
// The client gives up with "The server has 0 bytes ... data loss" both when a
// server answers with fewer bytes than it acknowledged, and when its own status
// query fails with a connection reset, which it means to retry: `getAndSetOffset`
// schedules the retry and returns, and `continueUploading` goes on with no offset
// (node_status_query_reset.js reproduces it without the relay). The checker tells
// the two apart by this record.
let lastStatusQuery = null;
{
  const src = path.dirname(requireClient.resolve('@google-cloud/storage'));
  const {Upload} = require(path.join(src, 'resumable-upload.js'));
  const check = Upload.prototype.checkUploadStatus;
  Upload.prototype.checkUploadStatus = async function (...args) {
    try {
      const resp = await check.apply(this, args);
      lastStatusQuery = {answered: true, status: resp.status, range: resp.headers.range || null};
      return resp;
    } catch (e) {
      lastStatusQuery = {answered: false, error: text(e)};
      throw e;
    }
  };
}

// Every refused connection, seen where Node's sockets emit their errors (node-fetch
// and teeny-request, under the client, connect with net.Socket): observed, not
// changed. `onRefused` logs it once the log is open.
let onRefused = () => {};
{
  const net = require('node:net');
  const emit = net.Socket.prototype.emit;
  net.Socket.prototype.emit = function (event, ...args) {
    if (event === 'error' && args[0] && args[0].code === 'ECONNREFUSED') onRefused(args[0]);
    return emit.call(this, event, ...args);
  };
}

// The alphabet of hard names: sim/src/workload.rs HARD_CHARS (besides `/`).
const HARD_CHARS = [
  'a', 'Z', '0', '9', ' ', '%', '%2F', '%25', '#', '?', '*', '[', ']', '{', '}', '^', '|', '<',
  '>', '"', '~', '`', '\\', '+', '&', '=', ';', ':', '@', '$', ',', "'", '!', '(', ')', '-',
  '_', '.', 'é', 'ü', 'ß', 'Ω', '☃', '中', '文', '𝄞', '\u00a0',
];
const CONTENT_TYPES = [
  'application/octet-stream', 'text/plain; charset=utf-8', 'application/json', 'image/png',
  'application/x-torture',
];
const CACHE_CONTROLS = ['no-store', 'public, max-age=60', 'private, max-age=0'];
const NOTE_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,_-=+:';
const KIB = 1024;

function options(argv) {
  const flags = {};
  for (let i = 0; i + 1 < argv.length; i += 2) {
    if (!argv[i].startsWith('--')) throw new Error(`unknown argument ${argv[i]}`);
    flags[argv[i].slice(2)] = argv[i + 1];
  }
  for (const required of ['endpoint', 'bucket', 'log', 'writer', 'seed']) {
    if (!flags[required]) throw new Error(`--${required} is required (see the top of writer.js)`);
  }
  return {
    endpoint: flags.endpoint.replace(/\/+$/, ''),
    bucket: flags.bucket,
    log: flags.log,
    writer: flags.writer,
    seed: Number(flags.seed),
    maxBytes: Number(flags['max-bytes'] || 6 * KIB * KIB),
    kinds: (flags.kinds || 'media,multipart,resumable').split(','),
  };
}

// mulberry32: a small seeded generator; random() in [0, 1).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = (random, list) => list[Math.floor(random() * list.length)];

// Log-uniform in [lo, hi].
function logUniform(random, lo, hi) {
  const x = Math.exp(Math.log(lo) + random() * (Math.log(hi + 1) - Math.log(lo)));
  return Math.min(hi, Math.max(lo, Math.floor(x)));
}

// Segments of hard characters joined by `/`: none empty, none `.` or `..`.
function hardPath(random) {
  const count = logUniform(random, 1, 60);
  let out = '';
  let segment = '';
  for (let i = 0; i < count; i++) {
    segment += pick(random, HARD_CHARS);
    if (i + 1 < count && segment !== '.' && segment !== '..' && random() < 0.1) {
      out += segment + '/';
      segment = '';
    }
  }
  if (segment === '.' || segment === '..') segment += 'a';
  return out + segment;
}

// Bytes from a seeded xorshift32 stream.
function payload(seed, size) {
  const words = new Uint32Array(Math.ceil(size / 4));
  let x = (seed >>> 0) || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x >>> 0;
  }
  return Buffer.from(words.buffer, 0, size);
}

// What the next upload is: kind, name, bytes, attributes.
function plan(random, opts, seq) {
  const kind = pick(random, opts.kinds);
  let size;
  let chunkSize = null;
  if (kind === 'resumable') {
    chunkSize = 256 * KIB * pick(random, [1, 2, 4, 8]);
    size = logUniform(random, chunkSize + 1, Math.max(opts.maxBytes, 3 * chunkSize));
  } else {
    size = random() < 0.05 ? 0 : logUniform(random, 1, opts.maxBytes);
  }
  const seq6 = String(seq).padStart(6, '0');
  const name = `torture/${opts.writer}/${seq6}/${hardPath(random)}`;
  const data = payload(Math.floor(random() * 4294967296), size);
  const contentType = pick(random, CONTENT_TYPES);
  let cacheControl = null;
  let metadata = null;
  if (kind !== 'media') {
    cacheControl = random() < 0.5 ? pick(random, CACHE_CONTROLS) : null;
    let note = 'n';
    const length = Math.floor(random() * 30);
    for (let i = 0; i < length; i++) note += pick(random, NOTE_CHARS);
    metadata = {writer: opts.writer, seq: String(seq), note: note + 'z'};
  }
  return {kind, name, data, chunkSize, contentType, cacheControl, metadata};
}

async function upload(storage, bucket, opts, p) {
  if (p.kind === 'media') {
    await new Promise((resolve, reject) =>
      storage.request(
        {
          method: 'POST',
          uri: `${opts.endpoint}/upload/storage/v1/b/${encodeURIComponent(opts.bucket)}/o`,
          qs: {uploadType: 'media', name: p.name, ifGenerationMatch: 0},
          headers: {'Content-Type': p.contentType},
          body: p.data,
          json: false,
        },
        (err, body) => (err ? reject(err) : resolve(body)),
      ),
    );
    return;
  }
  const metadata = {contentType: p.contentType, metadata: p.metadata};
  if (p.cacheControl) metadata.cacheControl = p.cacheControl;
  const saveOptions = {metadata, preconditionOpts: {ifGenerationMatch: 0}};
  if (p.kind === 'multipart') {
    saveOptions.resumable = false;
  } else {
    saveOptions.resumable = true;
    saveOptions.chunkSize = p.chunkSize;
  }
  await bucket.file(p.name).save(p.data, saveOptions);
}

function digests(data) {
  const md5 = crypto.createHash('md5').update(data).digest('base64');
  const crc = new CRC32C();
  crc.update(data);
  return {md5, crc32c: crc.toString()};
}

async function main() {
  const opts = options(process.argv.slice(2));
  let stop = false;
  process.stdin.on('end', () => (stop = true));
  process.stdin.on('close', () => (stop = true));
  process.stdin.on('error', () => (stop = true));
  process.stdin.resume();
  const append = line => fs.appendFileSync(opts.log, JSON.stringify(line) + '\n');
  const storage = new Storage({apiEndpoint: opts.endpoint, projectId: 'torture'});
  const bucket = storage.bucket(opts.bucket);
  const random = rng(opts.seed);
  // The client can throw out of its streams (an unhandled 'error' event) instead of
  // rejecting save()'s promise: such an exception is logged, and fails the upload in
  // progress, instead of ending the writer.
  let seq = 0;
  let failCurrent = null;
  onRefused = e => append({ev: 'refused', writer: opts.writer, seq, t: Date.now(), error: text(e)});
  process.on('uncaughtException', e => {
    append({ev: 'uncaught', writer: opts.writer, seq, t: Date.now(), error: text(e)});
    if (failCurrent) failCurrent(e);
  });
  for (; !stop; seq++) {
    const p = plan(random, opts, seq);
    const {md5, crc32c} = digests(p.data);
    const common = {writer: opts.writer, seq, name: p.name};
    append({ev: 'begin', ...common, t: Date.now(), kind: p.kind, size: p.data.length, md5, crc32c,
      contentType: p.contentType, cacheControl: p.cacheControl, metadata: p.metadata});
    const started = Date.now();
    const thrown = new Promise((_, reject) => (failCurrent = reject));
    lastStatusQuery = null;
    try {
      await Promise.race([upload(storage, bucket, opts, p), thrown]);
      append({ev: 'end', ...common, t: Date.now(), answer: 'ok', ms: Date.now() - started});
    } catch (e) {
      const code = typeof e.code === 'number' ? e.code : null;
      append({ev: 'end', ...common, t: Date.now(), answer: 'error', error: text(e), code,
        ms: Date.now() - started, lastStatusQuery});
    }
    failCurrent = null;
  }
}

const text = e => String((e && e.message) || e).slice(0, 2000);

main().then(
  () => process.exit(0),
  e => {
    console.error(`writer.js: ${e.stack || e}`);
    process.exit(2);
  },
);
