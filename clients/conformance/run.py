#!/usr/bin/env python3
"""The retry conformance cases the Node runner leaves to the official Python client.

Scenario 7 (resumable uploads that fail part-way: every case, including the one
the Node client fails against storage-testbench too) and scenario 8 (downloads
whose stream breaks), from scenarios.json, through google-cloud-storage against a
server that speaks the storage-testbench's /retry_test API; then a resumable
upload that fails once the session holds 8 MiB and must resume part-way, with the
requests recorded and the object's bytes compared.

    python run.py --endpoint http://127.0.0.1:4443 [--grep text] [--list]

Each case: a bucket (and for downloads, a 1 MiB object) made without the header; a
retry test created with the case's instructions; the call made by a client whose
every request carries `x-retry-test-id`; it must succeed, the bytes must be the
ones written, and the retry test must be completed. The last line is
`passed N of M`; the exit status is 1 when a case failed.
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import uuid

import requests
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = "fake-project"
NINE_MIB = 9 * 1024 * 1024
CHUNK = 2 * 1024 * 1024
FAIL_AFTER = 8192 * 1024
OBJECT_BYTES = 1024 * 1024
RUN = uuid.uuid4().hex[:8]


def client(endpoint, test_id=None):
    """A client for `endpoint`; with `test_id`, every request carries it."""
    c = storage.Client(
        project=PROJECT,
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )
    if test_id:
        # As Google's own conformance runner sets it: on the client's session.
        c._http.headers.update({"x-retry-test-id": test_id})
    return c


def fresh(kind):
    return f"conf-py-{RUN}-{kind}-{uuid.uuid4().hex[:8]}"


# Scenario 7: each call uploads 9 MiB to a new object with ifGenerationMatch=0 and
# returns the bytes it wrote.


def upload_from_string(bucket, name):
    data = os.urandom(NINE_MIB)
    blob = bucket.blob(name, chunk_size=CHUNK)
    blob.upload_from_string(data, if_generation_match=0)
    return data


def upload_from_string_one_request(bucket, name):
    data = os.urandom(NINE_MIB)
    bucket.blob(name).upload_from_string(data, if_generation_match=0)
    return data


def upload_from_file(bucket, name):
    data = os.urandom(NINE_MIB)
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        bucket.blob(name, chunk_size=CHUNK).upload_from_file(f, if_generation_match=0)
    return data


def blob_writer(bucket, name):
    data = os.urandom(NINE_MIB)
    with bucket.blob(name).open("wb", chunk_size=CHUNK, if_generation_match=0) as w:
        w.write(data)
    return data


# Scenario 8: each call reads the 1 MiB object and returns what it read and what it
# should have read.


def download_as_bytes(blob, data):
    return blob.download_as_bytes(), data


def download_to_filename(blob, data):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "object")
        blob.download_to_filename(path)
        with open(path, "rb") as f:
            return f.read(), data


def download_blob_to_file(blob, data):
    with tempfile.TemporaryFile() as f:
        blob.client.download_blob_to_file(blob, f)
        f.seek(0)
        return f.read(), data


def download_range(blob, data):
    return blob.download_as_bytes(start=1024, end=512 * 1024), data[1024 : 512 * 1024 + 1]


def blob_reader(blob, data):
    with blob.open("rb") as r:
        return r.read(), data


CALLS = {
    "storage.resumable.upload": [
        ("blob.upload_from_string (2 MiB chunks)", upload_from_string),
        ("blob.upload_from_string (one request)", upload_from_string_one_request),
        ("blob.upload_from_file (2 MiB chunks)", upload_from_file),
        ("blob.open('wb') (2 MiB chunks)", blob_writer),
    ],
    "storage.objects.download": [
        ("blob.download_as_bytes", download_as_bytes),
        ("blob.download_to_filename", download_to_filename),
        ("client.download_blob_to_file", download_blob_to_file),
        ("blob.download_as_bytes (range)", download_range),
        ("blob.open('rb')", blob_reader),
    ],
}


def retry_test(endpoint, method, instructions):
    r = requests.post(
        f"{endpoint}/retry_test",
        json={"instructions": {method: instructions}},
        timeout=30,
    )
    r.raise_for_status()
    return r.json()["id"]


def retry_test_state(endpoint, test_id):
    r = requests.get(f"{endpoint}/retry_test/{test_id}", timeout=30)
    r.raise_for_status()
    return r.json()


def run_case(endpoint, scenario, instructions, method, call):
    """Runs one case; the problems found (none: it passed)."""
    plain = client(endpoint)
    bucket_name = fresh("bucket")
    plain.create_bucket(bucket_name)
    data = None
    if "OBJECT" in method["resources"]:
        data = os.urandom(OBJECT_BYTES)
        plain.bucket(bucket_name).blob("object").upload_from_string(data)
    test_id = retry_test(endpoint, method["name"], instructions)
    bucket = client(endpoint, test_id).bucket(bucket_name)
    problems = []
    try:
        if data is None:
            name = fresh("new")
            written = call(bucket, name)
            read = plain.bucket(bucket_name).blob(name).download_as_bytes()
            expected = written
        else:
            read, expected = call(bucket.blob("object"), data)
        if read != expected:
            problems.append(f"read {len(read)} bytes that are not the {len(expected)} expected")
    except Exception as e:  # noqa: BLE001 - the case reports any failure
        if scenario["expectSuccess"]:
            problems.append(f"expected success, got {type(e).__name__}: {str(e).splitlines()[0][:300]}")
    state = retry_test_state(endpoint, test_id)
    if state.get("completed") is not True:
        problems.append(f"retry test {test_id} not completed; left: {json.dumps(state['instructions'])}")
    return problems


def plan(grep):
    with open(os.path.join(HERE, "scenarios.json")) as f:
        scenarios = json.load(f)["retryTests"]
    cases = []
    for scenario in scenarios:
        for index, case in enumerate(scenario["cases"]):
            for method in scenario["methods"]:
                for via, call in CALLS.get(method.get("group", ""), []):
                    instructions = case["instructions"]
                    name = f"S{scenario['id']}/{index}/{method['name']}/{via} [{', '.join(instructions)}]"
                    if grep in name:
                        cases.append((name, scenario, instructions, method, call))
    return cases


def record(c):
    """Records every response `c` gets: (method, Content-Range, status, Range)."""
    log = []

    def hook(response, *args, **kwargs):
        sent = response.request.headers.get("Content-Range", "")
        log.append((response.request.method, sent, response.status_code, response.headers.get("Range", "")))

    c._http.hooks["response"].append(hook)
    return log


def start_of(content_range):
    """The first byte a data request's `Content-Range` names (None for a query)."""
    first = content_range.removeprefix("bytes ").split("-")[0]
    return int(first) if first.isdigit() else None


def resumed_part_way(log):
    """Checks the recorded requests: a data request failed with 503, no later
    request went back before that request's first byte, the server then reported
    the 8 MiB it kept (308 with `Range: bytes=0-8388607`), and the upload went on
    from byte 8388608 to 200. A line describing them."""
    failed = next(i for i, e in enumerate(log) if e[2] == 503 and start_of(e[1]) is not None)
    after = log[failed + 1 :]
    floor = start_of(log[failed][1])
    assert all(start_of(e[1]) is None or start_of(e[1]) >= floor for e in after), "went back"
    told = next(i for i, e in enumerate(after) if e[2] == 308 and e[3] == f"bytes=0-{FAIL_AFTER - 1}")
    resumed = next(e for e in after[told + 1 :] if start_of(e[1]) is not None)
    assert start_of(resumed[1]) == FAIL_AFTER and resumed[2] == 200, resumed
    return " | ".join(f"{m} {r} -> {s}{' ' + a if a else ''}" for m, r, s, a in log[failed:])


def demonstrate(endpoint):
    """The resumable upload failing once the session holds 8 MiB; True when it
    resumed part-way with the right bytes. In 2 MiB chunks: the client resends
    only the chunk that failed (in one request it resends the whole request, of
    which the server keeps what it lacks, so that shows nothing part-way)."""
    print(f"resumable upload of {NINE_MIB} bytes failing once the session holds {FAIL_AFTER} (return-503-after-8192K):")
    ok = True
    for mode, chunk_size in [("2 MiB chunks", CHUNK)]:
        test_id = retry_test(endpoint, "storage.objects.insert", ["return-503-after-8192K"])
        c = client(endpoint, test_id)
        log = record(c)
        bucket_name = fresh("demo")
        client(endpoint).create_bucket(bucket_name)
        data = os.urandom(NINE_MIB)
        try:
            c.bucket(bucket_name).blob("nine-mib", chunk_size=chunk_size).upload_from_string(
                data, if_generation_match=0
            )
            shown = resumed_part_way(log)
            back = client(endpoint).bucket(bucket_name).blob("nine-mib").download_as_bytes()
            assert back == data, f"{len(back)} bytes read back differ from the {len(data)} written"
            assert retry_test_state(endpoint, test_id)["completed"] is True, "retry test not completed"
            md5 = hashlib.md5(data).hexdigest()
            print(f"ok   resumable upload (Python, {mode}): {shown}")
            print(f"     resumed at byte {FAIL_AFTER} of {NINE_MIB}; the bytes read back are the ones written (md5 {md5})")
        except (AssertionError, StopIteration, Exception) as e:  # noqa: BLE001
            ok = False
            print(f"FAIL resumable upload (Python, {mode}): {type(e).__name__}: {e}; requests: {log}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default=os.environ.get("STORAGE_EMULATOR_HOST"))
    parser.add_argument("--grep", default="")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    cases = plan(args.grep)
    if args.list:
        print("\n".join(name for name, *_ in cases))
        return 0
    if not args.endpoint:
        parser.error("--endpoint URL (or STORAGE_EMULATOR_HOST) is required")
    endpoint = args.endpoint.rstrip("/")
    print(f"{len(cases)} cases against {endpoint} (Python client {storage.__version__})")
    failed = 0
    failed_combinations = set()
    for name, scenario, instructions, method, call in cases:
        started = time.monotonic()
        try:
            problems = run_case(endpoint, scenario, instructions, method, call)
        except Exception as e:  # noqa: BLE001
            problems = [f"could not run: {type(e).__name__}: {e}"]
        if problems:
            failed += 1
            failed_combinations.add(name.rsplit("/", 1)[0])
            print(f"FAIL {name}\n     " + "\n     ".join(problems))
        elif os.environ.get("CONFORMANCE_VERBOSE"):
            print(f"ok   {name} ({time.monotonic() - started:.1f} s)")
    demo_ok = demonstrate(endpoint) if not args.grep else True
    combinations = {name.rsplit("/", 1)[0] for name, *_ in cases}
    passed = len(combinations - failed_combinations)
    print(f"scenario x case x method: {passed} of {len(combinations)} (scenarios 7 and 8) passed through the Python client")
    print(f"passed {len(cases) - failed} of {len(cases)} (Python)")
    return 1 if failed or not demo_ok else 0


if __name__ == "__main__":
    sys.exit(main())
