#!/usr/bin/env python3
"""Checks what official clients wrote through spool-relay: every object reached the
upstream under its exact name with its bytes and attributes.

    python3 clients/relay_check.py --upstream http://127.0.0.1:PORT --bucket bkt \\
        --metrics http://127.0.0.1:PORT/metrics [--expect stored,spooled] MANIFEST...

The manifests are what `check.js`/`check.py --suite uploads --manifest FILE` wrote
(one JSON line per object: name, size, md5Hash, content type, attributes). It
first waits (at most --timeout seconds) until the relay's spool is empty, reading
the relay's metrics endpoint; fails if anything was dead-lettered or quarantined,
or if an outcome named by --expect (`spool_uploads_total{outcome=...}`: stored,
spooled, rejected) never happened. Then, for each object, it reads the resource
and the bytes from the upstream (the fake, directly: the relay passes no reads
through) and compares them. Prints `ok` or `FAIL` per object; exits 1 when any
check fails. Standard library only.
"""

import argparse
import base64
import hashlib
import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ATTRIBUTES = [
    "contentType",
    "contentEncoding",
    "cacheControl",
    "contentDisposition",
    "contentLanguage",
    "metadata",
]


def get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def metrics(url):
    """The samples of a Prometheus text page: {'name{labels}': value}."""
    samples = {}
    for line in get(url).decode().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def wait_until_drained(url, timeout):
    """The relay's samples once its spool holds nothing, or None on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        samples = metrics(url)
        if samples.get("spool_files") == 0 and samples.get("spool_reserved_files", 0) == 0:
            return samples
        if time.monotonic() > deadline:
            print(f"FAIL the relay's spool still holds {samples.get('spool_files')} entries "
                  f"after {timeout} s", flush=True)
            return None
        time.sleep(0.2)


def check_relay(samples, expected):
    """Failures of the relay's counters: nothing set aside, each expected outcome seen."""
    failures = []
    for gauge in ("spool_dead_letter_files", "spool_quarantined_files"):
        if samples.get(gauge, 0) != 0:
            failures.append(f"{gauge} is {samples[gauge]}")
    outcomes = {}
    for key, value in samples.items():
        found = re.fullmatch(r'spool_uploads_total\{outcome="(\w+)"\}', key)
        if found:
            outcomes[found.group(1)] = int(value)
    print(f"relay uploads by outcome: {json.dumps(outcomes, sort_keys=True)}", flush=True)
    for outcome in expected:
        if outcomes.get(outcome, 0) == 0:
            failures.append(f"no upload ended {outcome!r}")
    return failures


def check_object(upstream, bucket, entry):
    """Why the upstream's object differs from the manifest `entry`, or None."""
    path = (f"{upstream}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}"
            f"/o/{urllib.parse.quote(entry['name'], safe='')}")
    try:
        resource = json.loads(get(path))
        data = get(path + "?alt=media")
    except urllib.error.HTTPError as e:
        return f"the upstream answered {e.code}"
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    if len(data) != entry["size"] or md5 != entry["md5Hash"]:
        return f"bytes differ: {len(data)} bytes with MD5 {md5}, expected {entry['size']} {entry['md5Hash']}"
    if resource.get("md5Hash") != entry["md5Hash"]:
        return f"md5Hash {resource.get('md5Hash')}, expected {entry['md5Hash']}"
    for key in ATTRIBUTES:
        if key in entry and resource.get(key) != entry[key]:
            return f"{key} is {resource.get(key)!r}, expected {entry[key]!r}"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the fake the relay writes to")
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--metrics", required=True, help="the relay's metrics URL")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--expect", default="", help="outcomes that must have happened")
    parser.add_argument("manifests", nargs="+")
    args = parser.parse_args()
    samples = wait_until_drained(args.metrics, args.timeout)
    if samples is None:
        return 1
    failures = check_relay(samples, [o for o in args.expect.split(",") if o])
    for failure in failures:
        print(f"FAIL relay: {failure}", flush=True)
    entries = []
    for manifest in args.manifests:
        with open(manifest, encoding="utf-8") as lines:
            entries.extend(json.loads(line) for line in lines if line.strip())
    wrong = 0
    for entry in entries:
        why = check_object(args.upstream.rstrip("/"), args.bucket, entry)
        label = f"{entry['client']} {entry['name']}"
        print(f"FAIL {label}: {why}" if why else f"ok   {label}", flush=True)
        wrong += why is not None
    ok = not failures and wrong == 0 and entries
    print(f"relay_check: {len(entries) - wrong} of {len(entries)} objects in the upstream "
          f"as written{'' if ok else '; FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
