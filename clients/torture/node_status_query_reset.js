#!/usr/bin/env node
// Reproduces, without the relay, how the official Node client (@google-cloud/storage
// 7.22.0, clients/node) gives up a chunked resumable upload with "The server has 0
// bytes ... Stopping as this could result in data loss" when nothing was lost: a
// chunk's connection is reset (the server died), and the status query the client
// then sends (`PUT`, `Content-Range: bytes */*`) is reset too. The client classes a
// reset as retryable: `getAndSetOffset` schedules a retry and returns, but
// `continueUploading` goes on at once with no offset, that is 0, below the bytes the
// server acknowledged.
//
//   node clients/torture/node_status_query_reset.js
//
// A small server here acknowledges two chunks (308, Range), resets the connection of
// the third and of the first status query, and would answer the next status query
// with the two chunks. Prints what the client did; exits 0 when the client gave up
// that way (the bug is there), 1 otherwise. The torture run's checker uses what
// writer.js records of each status query to tell this from a server that lost bytes.

'use strict';

const http = require('node:http');
const path = require('node:path');
const {createRequire} = require('node:module');

const requireClient = createRequire(path.join(__dirname, '..', 'node', 'package.json'));
const {Storage} = requireClient('@google-cloud/storage');

let received = 0;
let chunks = 0;
let statusQueries = 0;

function serve(request, response, body) {
  const range = request.headers['content-range'] || '';
  if (request.method === 'POST') {
    const port = server.address().port;
    response.writeHead(200, {location: `http://127.0.0.1:${port}/session`});
    return response.end();
  }
  if (range.startsWith('bytes */')) {
    statusQueries++;
    console.log(`status query ${statusQueries}: the server has ${received} bytes`);
    if (statusQueries === 1) return request.socket.destroy();
    response.writeHead(308, received ? {range: `bytes=0-${received - 1}`} : {});
    return response.end();
  }
  chunks++;
  if (chunks === 3) {
    console.log(`chunk ${chunks}: connection reset; the server keeps ${received} bytes`);
    return request.socket.destroy();
  }
  received += body.length;
  console.log(`chunk ${chunks}: 308, Range bytes=0-${received - 1}`);
  response.writeHead(308, {range: `bytes=0-${received - 1}`});
  response.end();
}

const server = http.createServer((request, response) => {
  const parts = [];
  request.on('data', part => parts.push(part));
  request.on('end', () => serve(request, response, Buffer.concat(parts)));
});

function verdict(message) {
  console.log(`the client: ${message}`);
  const bug = message.includes('The server has 0 bytes') && received > 0;
  console.log(bug ? 'reproduced: the client gave up with bytes acknowledged and none lost'
    : 'not reproduced');
  server.close();
  process.exit(bug ? 0 : 1);
}

process.on('uncaughtException', e => verdict(`threw ${e.message}`));
server.listen(0, '127.0.0.1', async () => {
  const endpoint = `http://127.0.0.1:${server.address().port}`;
  const storage = new Storage({apiEndpoint: endpoint, projectId: 'x'});
  try {
    await storage.bucket('b').file('o').save(Buffer.alloc(1024 * 1024, 1), {
      resumable: true,
      chunkSize: 256 * 1024,
      preconditionOpts: {ifGenerationMatch: 0},
    });
    verdict('resolved');
  } catch (e) {
    verdict(`rejected: ${e.message}`);
  }
});
