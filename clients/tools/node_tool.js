// The official Node client's natural uploads, for clients/tools/run.py: `bucket.upload`
// of every file of a tree, then `file.createWriteStream` of its largest file under
// another name. Prints one JSON line: {"uploaded": {name: size}}.
//
//   node clients/tools/node_tool.js ENDPOINT BUCKET PREFIX TREE
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const {pipeline} = require('node:stream/promises');
const {Storage} = require('@google-cloud/storage');

function files(root, dir = '') {
  return fs.readdirSync(path.join(root, dir), {withFileTypes: true}).flatMap(e => {
    const rel = dir ? `${dir}/${e.name}` : e.name;
    return e.isDirectory() ? files(root, rel) : [rel];
  });
}

async function main() {
  const [endpoint, bucketName, prefix, root] = process.argv.slice(2);
  const storage = new Storage({apiEndpoint: endpoint, projectId: 'test'});
  const bucket = storage.bucket(bucketName);
  const uploaded = {};
  for (const rel of files(root).sort()) {
    await bucket.upload(path.join(root, rel), {destination: `${prefix}tree/${rel}`});
    uploaded[`${prefix}tree/${rel}`] = fs.statSync(path.join(root, rel)).size;
  }
  const big = files(root).sort((a, b) =>
    fs.statSync(path.join(root, b)).size - fs.statSync(path.join(root, a)).size)[0];
  const name = `${prefix}stream/${big}`;
  await pipeline(fs.createReadStream(path.join(root, big)), bucket.file(name).createWriteStream());
  uploaded[name] = fs.statSync(path.join(root, big)).size;
  console.log(JSON.stringify({uploaded, streamed: big}));
}

main().catch(e => {
  console.error(e);
  process.exit(1);
});
