// Writes through a spool-relay that requires a token, with @google-cloud/storage as
// a service would configure it: the token is the OAuth access token of an
// OAuth2Client, and useAuthWithCustomEndpoint makes the client send it to a custom
// apiEndpoint (by default it sends no credentials there). One more line is needed
// for resumable uploads through save() or createWriteStream(): in 7.22.0 those do
// not pass useAuthWithCustomEndpoint on (build/cjs/src/file.js,
// startResumableUpload_; createResumableUpload() does), so they would go without
// credentials; a request interceptor puts the header on them.
//
//   node clients/node/auth_demo.js --endpoint http://127.0.0.1:4443 --bucket BUCKET \
//       --token-file /etc/spool-relay/token        # or SPOOL_RELAY_TOKEN in the environment
//
// Writes one object in one request and one in a resumable session (256 KiB chunks),
// each create-if-absent; prints one line per object and exits 0, or prints the
// client's error and exits 1.
'use strict';

const fs = require('fs');
const {Storage} = require('@google-cloud/storage');
const {OAuth2Client} = require('google-auth-library');

function args() {
  const opts = {prefix: `auth-demo/node-${process.pid}-${Date.now()}`};
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '').replace(/-/g, '_');
    opts[key] = argv[i + 1];
  }
  if (!opts.endpoint || !opts.bucket) {
    throw new Error('usage: auth_demo.js --endpoint URL --bucket NAME [--token-file PATH] [--prefix P]');
  }
  const token = opts.token_file
    ? fs.readFileSync(opts.token_file, 'utf8').trim()
    : (process.env.SPOOL_RELAY_TOKEN || '').trim();
  if (!token) {
    throw new Error('no token: give --token-file PATH or set SPOOL_RELAY_TOKEN');
  }
  return {...opts, token};
}

async function main() {
  const opts = args();
  const authClient = new OAuth2Client();
  authClient.setCredentials({access_token: opts.token});
  const storage = new Storage({
    apiEndpoint: opts.endpoint,
    projectId: 'spool-relay-demo',
    authClient,
    useAuthWithCustomEndpoint: true,
  });
  // For resumable uploads through save()/createWriteStream() (see the top).
  storage.interceptors.push({
    request: reqOpts => ({
      ...reqOpts,
      headers: {...reqOpts.headers, Authorization: `Bearer ${opts.token}`},
    }),
  });
  const bucket = storage.bucket(opts.bucket);
  const precondition = {preconditionOpts: {ifGenerationMatch: 0}};

  const small = bucket.file(`${opts.prefix}/one-request.txt`);
  await small.save('written with a bearer token\n', {resumable: false, ...precondition});
  console.log(`ok node: ${small.name} (one request, Authorization: Bearer)`);

  const data = Buffer.alloc(600 * 1024, 'r');
  const large = bucket.file(`${opts.prefix}/resumable.bin`);
  await large.save(data, {resumable: true, chunkSize: 256 * 1024, ...precondition});
  console.log(`ok node: ${large.name} (resumable session, ${data.length} bytes)`);
}

main().catch(e => {
  console.error(`FAIL node: ${e.code || ''} ${e.message}`);
  process.exit(1);
});
