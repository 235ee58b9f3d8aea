#!/usr/bin/env node
// Checks the official Node client, @google-cloud/storage, against a server that
// speaks Cloud Storage's JSON API: fake-gcs, or later a relay that takes the same
// uploads. Each check prints `ok` or `FAIL` with the reason; the exit status is 1
// when any check fails.
//
//   node check.js --endpoint http://127.0.0.1:4443 --bucket bkt [--only a,b] [--prefix p/]
//   node check.js --endpoint http://127.0.0.1:4443 --bucket bkt --suite uploads --manifest FILE
//
// The endpoint and bucket may also come from GCS_ENDPOINT and GCS_BUCKET (or
// STORAGE_EMULATOR_HOST for the endpoint). `--only` (or GCS_CHECKS) runs a subset,
// for a server that serves only part of the API; `--list` names the checks. Objects
// are written under a fresh prefix (node-<time>-<pid>/ unless --prefix), so runs do
// not collide on a server that keeps its objects.
//
// `--suite uploads` (or GCS_SUITE) is for a server that takes uploads but serves no
// reads, such as spool-relay: it runs the upload checks (UPLOAD_CHECKS) and skips
// their read-backs. `--manifest FILE` (or GCS_MANIFEST) appends one JSON line per
// object a check wrote (name, size, md5Hash, content type, attributes), so that a
// later step can check each one where it ended up (clients/relay_check.py).

'use strict';

const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const zlib = require('node:zlib');
const {Storage} = require('@google-cloud/storage');

function options(argv, env) {
  const flags = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--list') {
      flags.list = true;
    } else if (arg.startsWith('--') && i + 1 < argv.length) {
      flags[arg.slice(2)] = argv[++i];
    } else {
      throw new Error(`unknown argument ${JSON.stringify(arg)}; see the comment at the top of check.js`);
    }
  }
  return {
    endpoint: flags.endpoint || env.GCS_ENDPOINT || env.STORAGE_EMULATOR_HOST,
    bucket: flags.bucket || env.GCS_BUCKET,
    only: (flags.only || env.GCS_CHECKS || '').split(',').filter(Boolean),
    suite: flags.suite || env.GCS_SUITE || 'all',
    manifest: flags.manifest || env.GCS_MANIFEST,
    prefix: flags.prefix || `node-${Date.now()}-${process.pid}/`,
    list: Boolean(flags.list),
  };
}

// The checks `--suite uploads` runs, without their read-backs.
const UPLOAD_CHECKS = ['simple_upload', 'multipart_upload', 'resumable_upload', 'attributes'];

// Appends what an object written under `name` must hold to the manifest, if any.
function recorder(manifest) {
  const fs = require('node:fs');
  return (name, data, attributes = {}) => {
    if (!manifest) return;
    const md5Hash = crypto.createHash('md5').update(data).digest('base64');
    const entry = {client: 'node', name, size: data.length, md5Hash, ...attributes};
    fs.appendFileSync(manifest, JSON.stringify(entry) + '\n');
  };
}

// 300 KiB of bytes that differ per run.
function payload(size = 300 * 1024) {
  return crypto.randomBytes(size);
}

// Whether `promise` rejects with HTTP status `code`.
async function rejectsWith(promise, code) {
  try {
    await promise;
  } catch (e) {
    assert.equal(e.code, code, `expected ${code}, got ${e.code}: ${e.message}`);
    return;
  }
  assert.fail(`expected a ${code} error, but the request succeeded`);
}

// The checks, in order; each gets the run's context.
const CHECKS = {
  // uploadType=media, sent through the client's own authenticated request path
  // (the client's save() uses multipart or resumable uploads only).
  async simple_upload({storage, bucket, endpoint, name, record, writesOnly}) {
    const data = payload();
    const object = name('simple.bin');
    const [resource] = await new Promise((resolve, reject) =>
      storage.request(
        {
          method: 'POST',
          uri: `${endpoint}/upload/storage/v1/b/${encodeURIComponent(bucket.name)}/o`,
          qs: {uploadType: 'media', name: object, ifGenerationMatch: 0},
          headers: {'Content-Type': 'application/octet-stream'},
          body: data,
          json: false,
        },
        (err, body) => (err ? reject(err) : resolve([body])),
      ),
    );
    const parsed = typeof resource === 'string' ? JSON.parse(resource) : resource;
    assert.equal(parsed.name, object);
    assert.equal(Number(parsed.size), data.length);
    record(object, data, {contentType: 'application/octet-stream'});
    if (writesOnly) return;
    const [downloaded] = await bucket.file(object).download({validation: 'crc32c'});
    assert.ok(downloaded.equals(data), 'the downloaded bytes differ');
  },

  // save() without resumable: one multipart request (chunked), crc32c checked by
  // the client against the server's answer.
  async multipart_upload({bucket, name, record, writesOnly}) {
    const data = payload();
    const file = bucket.file(name('multipart.bin'));
    await file.save(data, {resumable: false, preconditionOpts: {ifGenerationMatch: 0}});
    record(file.name, data);
    if (writesOnly) return;
    const [metadata] = await file.getMetadata();
    assert.equal(Number(metadata.size), data.length);
  },

  // save() with resumable: a session, filled in 256 KiB chunks (Content-Range).
  async resumable_upload({bucket, name, record, writesOnly}) {
    const data = payload(700 * 1024);
    const file = bucket.file(name('resumable.bin'));
    await file.save(data, {
      resumable: true,
      chunkSize: 256 * 1024,
      preconditionOpts: {ifGenerationMatch: 0},
    });
    record(file.name, data);
    if (writesOnly) return;
    const [downloaded] = await file.download();
    assert.ok(downloaded.equals(data), 'the downloaded bytes differ');
  },

  // Downloads validated by crc32c and by MD5, whole and by range.
  async download_validated({bucket, name}) {
    const data = payload();
    const file = bucket.file(name('validated.bin'));
    await file.save(data, {resumable: false, validation: 'md5'});
    for (const validation of ['crc32c', 'md5']) {
      const [downloaded] = await file.download({validation});
      assert.ok(downloaded.equals(data), `the bytes validated by ${validation} differ`);
    }
    const [part] = await file.download({start: 10, end: 19});
    assert.ok(part.equals(data.subarray(10, 20)), 'the range differs');
  },

  // Content type, encoding, cache control, disposition, language and custom
  // metadata come back as given; gzip bytes are served as stored.
  async attributes({bucket, name, record, writesOnly}) {
    const data = zlib.gzipSync(Buffer.from('a,b\n1,2\n'.repeat(100)));
    const file = bucket.file(name('attributes.csv.gz'));
    const given = {
      contentType: 'text/csv',
      contentEncoding: 'gzip',
      cacheControl: 'no-store',
      contentDisposition: 'attachment; filename="a.csv"',
      contentLanguage: 'fr',
      metadata: {owner: 'node', run: '7'},
    };
    await file.save(data, {resumable: false, metadata: given});
    record(file.name, data, given);
    if (writesOnly) return;
    const [metadata] = await file.getMetadata();
    for (const [key, value] of Object.entries(given)) {
      assert.deepEqual(metadata[key], value, `${key} came back as ${JSON.stringify(metadata[key])}`);
    }
    const [raw] = await file.download({decompress: false});
    assert.ok(raw.equals(data), 'the stored bytes differ');
  },

  // getFiles with a prefix lists exactly the objects under it, in name order.
  async list({bucket, name}) {
    const names = ['list/b', 'list/a', 'list/c/d'].map(name);
    for (const object of names) {
      await bucket.file(object).save('x', {resumable: false});
    }
    const [files] = await bucket.getFiles({prefix: name('list/')});
    assert.deepEqual(files.map(f => f.name), [...names].sort());
    const [, , response] = await bucket.getFiles({
      prefix: name('list/'),
      delimiter: '/',
      autoPaginate: false,
    });
    assert.deepEqual(response.prefixes, [name('list/c/')]);
  },

  // delete() removes the object; a second delete is 404.
  async delete({bucket, name}) {
    const file = bucket.file(name('delete.bin'));
    await file.save('x', {resumable: false});
    await file.delete();
    const [exists] = await file.exists();
    assert.equal(exists, false);
    await rejectsWith(file.delete(), 404);
  },

  // ifGenerationMatch: 0 on an object that exists is 412, and the object keeps
  // its bytes; the live generation's match succeeds.
  async precondition({bucket, name}) {
    const file = bucket.file(name('precondition.bin'));
    const only = {resumable: false, preconditionOpts: {ifGenerationMatch: 0}};
    await file.save('first', only);
    await rejectsWith(file.save('second', only), 412);
    const [kept] = await file.download();
    assert.equal(kept.toString(), 'first');
    const [metadata] = await file.getMetadata();
    const exact = {resumable: false, preconditionOpts: {ifGenerationMatch: metadata.generation}};
    await file.save('third', exact);
  },

  // combine() makes a composite object: no MD5, a component count, and a
  // download the client validates by crc32c.
  async compose({bucket, name}) {
    const parts = ['compose/1', 'compose/2'].map(n => bucket.file(name(n)));
    await parts[0].save('hello ', {resumable: false});
    await parts[1].save('world', {resumable: false});
    const [composite] = await bucket.combine(parts, name('compose/all'));
    const [metadata] = await composite.getMetadata();
    assert.equal(metadata.componentCount, 2);
    assert.equal(metadata.md5Hash, undefined);
    const [downloaded] = await composite.download({validation: 'crc32c'});
    assert.equal(downloaded.toString(), 'hello world');
  },
};

// The version of the package installed (its package.json is not exported).
function installedVersion(pkg) {
  const fs = require('node:fs');
  const path = require('node:path');
  let dir = path.dirname(require.resolve(pkg));
  while (dir !== path.dirname(dir)) {
    const manifest = path.join(dir, 'package.json');
    if (fs.existsSync(manifest)) {
      const parsed = JSON.parse(fs.readFileSync(manifest, 'utf8'));
      if (parsed.name === pkg) return parsed.version;
    }
    dir = path.dirname(dir);
  }
  return 'unknown';
}

async function main() {
  const opts = options(process.argv.slice(2), process.env);
  if (opts.list) {
    console.log(Object.keys(CHECKS).join('\n'));
    return 0;
  }
  if (!opts.endpoint || !opts.bucket) {
    throw new Error('give --endpoint URL and --bucket NAME (or GCS_ENDPOINT and GCS_BUCKET)');
  }
  const unknown = opts.only.filter(c => !(c in CHECKS));
  if (unknown.length > 0) {
    throw new Error(`unknown checks ${unknown.join(', ')}; known: ${Object.keys(CHECKS).join(', ')}`);
  }
  if (opts.suite !== 'all' && opts.suite !== 'uploads') {
    throw new Error(`unknown suite ${opts.suite}; known: all, uploads`);
  }
  const writesOnly = opts.suite === 'uploads';
  const notUploads = opts.only.filter(c => !UPLOAD_CHECKS.includes(c));
  if (writesOnly && notUploads.length > 0) {
    throw new Error(`--suite uploads runs only ${UPLOAD_CHECKS.join(', ')}; not ${notUploads.join(', ')}`);
  }
  const storage = new Storage({apiEndpoint: opts.endpoint, projectId: 'test'});
  const context = {
    storage,
    bucket: storage.bucket(opts.bucket),
    endpoint: opts.endpoint.replace(/\/+$/, ''),
    name: suffix => `${opts.prefix}${suffix}`,
    record: recorder(opts.manifest),
    writesOnly,
  };
  const all = writesOnly ? UPLOAD_CHECKS : Object.keys(CHECKS);
  const selected = opts.only.length > 0 ? opts.only : all;
  let failed = 0;
  for (const check of selected) {
    try {
      await CHECKS[check](context);
      console.log(`ok   ${check}`);
    } catch (e) {
      failed += 1;
      console.log(`FAIL ${check}: ${e.message}`);
    }
  }
  const version = installedVersion('@google-cloud/storage');
  console.log(
    `node @google-cloud/storage ${version} against ${opts.endpoint} bucket ${opts.bucket}: ` +
      `${selected.length - failed} of ${selected.length} checks passed`,
  );
  return failed === 0 ? 0 : 1;
}

main().then(
  code => process.exit(code),
  e => {
    console.error(`check.js: ${e.message}`);
    process.exit(2);
  },
);
