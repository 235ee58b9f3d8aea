#!/usr/bin/env python3
"""One writer of the torture run (docs/torture.md): uploads objects of unique hard
names, sizes from 0 bytes to several MiB and attributes through the official Python
client, google-cloud-storage (clients/python/requirements.txt), in a loop until its
standard input closes; then it finishes the upload in progress and exits 0.

    python writer.py --endpoint http://127.0.0.1:PORT --bucket bkt --log FILE \\
        --writer python-0 --seed 7 [--max-bytes 6291456] [--kinds media,multipart,resumable]

The client is configured as clients/python/check.py configures it (anonymous
credentials, `api_endpoint`), with its default retries (what users run); every write
carries if_generation_match=0, as docs/relay.md asks. Kinds, as check.py uses them:

    media      google.resumable_media's SimpleUpload, uploadType=media (content type only)
    multipart  blob.upload_from_string(data, ...) with attributes
    resumable  blob.upload_from_file(stream of unknown size) with chunk_size 256 KiB x k (k of 1, 2, 4, 8: a 2 MiB chunk is more than one of the relay's 1 MiB pieces, so one broken off mid-body leaves bytes behind):
               at least two chunks

The log gets one JSON line before each upload (`ev: "begin"`: writer, seq, kind,
name, size, md5 and crc32c in base64, contentType, cacheControl, metadata) and one
after it (`ev: "end"`: answer `ok` when the client call returned, else `error` with
the exception's text and HTTP code, and the milliseconds it took), each flushed, both
with `t`, the wall-clock time in milliseconds since the Unix epoch. Every connection
refused (ECONNREFUSED) is logged as it happens as `ev: "refused"` (writer, seq of the
upload in progress, the error's text): the client retries a refused request itself,
so the upload's end line may say `ok` all the same.
"""

import argparse
import base64
import hashlib
import io
import json
import math
import random
import struct
import sys
import threading
import time
import urllib.parse

import google_crc32c
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import AuthorizedSession
from google.cloud import storage
from google.resumable_media.requests import SimpleUpload

# The alphabet of hard names: sim/src/workload.rs HARD_CHARS (besides `/`).
HARD_CHARS = [
    "a", "Z", "0", "9", " ", "%", "%2F", "%25", "#", "?", "*", "[", "]", "{", "}", "^", "|", "<",
    ">", '"', "~", "`", "\\", "+", "&", "=", ";", ":", "@", "$", ",", "'", "!", "(", ")", "-",
    "_", ".", "é", "ü", "ß", "Ω", "☃", "中", "文", "𝄞", "\u00a0",
]  # fmt: skip
CONTENT_TYPES = [
    "application/octet-stream",
    "text/plain; charset=utf-8",
    "application/json",
    "image/png",
    "application/x-torture",
]
CACHE_CONTROLS = ["no-store", "public, max-age=60", "private, max-age=0"]
NOTE_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,_-=+:"
KIB = 1024


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--max-bytes", type=int, default=6 * KIB * KIB)
    parser.add_argument("--kinds", default="media,multipart,resumable")
    args = parser.parse_args()
    args.endpoint = args.endpoint.rstrip("/")
    args.kinds = args.kinds.split(",")
    return args


def log_uniform(rng, lo, hi):
    """Log-uniform in [lo, hi]."""
    x = math.exp(math.log(lo) + rng.random() * (math.log(hi + 1) - math.log(lo)))
    return min(hi, max(lo, int(x)))


def hard_path(rng):
    """Segments of hard characters joined by `/`: none empty, none `.` or `..`."""
    count = log_uniform(rng, 1, 60)
    out, segment = "", ""
    for i in range(count):
        segment += rng.choice(HARD_CHARS)
        if i + 1 < count and segment not in (".", "..") and rng.random() < 0.1:
            out += segment + "/"
            segment = ""
    if segment in (".", ".."):
        segment += "a"
    return out + segment


def plan(rng, args, seq):
    """What the next upload is: kind, name, bytes, attributes."""
    kind = rng.choice(args.kinds)
    chunk_size = None
    if kind == "resumable":
        chunk_size = 256 * KIB * rng.choice([1, 2, 4, 8])
        size = log_uniform(rng, chunk_size + 1, max(args.max_bytes, 3 * chunk_size))
    else:
        size = 0 if rng.random() < 0.05 else log_uniform(rng, 1, args.max_bytes)
    name = f"torture/{args.writer}/{seq:06d}/{hard_path(rng)}"
    data = random.Random(rng.getrandbits(64)).randbytes(size)
    content_type = rng.choice(CONTENT_TYPES)
    cache_control = None
    metadata = None
    if kind != "media":
        cache_control = rng.choice(CACHE_CONTROLS) if rng.random() < 0.5 else None
        note = "n" + "".join(rng.choice(NOTE_CHARS) for _ in range(rng.randrange(30))) + "z"
        metadata = {"writer": args.writer, "seq": str(seq), "note": note}
    return {
        "kind": kind,
        "name": name,
        "data": data,
        "chunk_size": chunk_size,
        "content_type": content_type,
        "cache_control": cache_control,
        "metadata": metadata,
    }


def upload(args, bucket, session, p):
    if p["kind"] == "media":
        url = (
            f"{args.endpoint}/upload/storage/v1/b/{urllib.parse.quote(args.bucket, safe='')}/o"
            f"?uploadType=media&ifGenerationMatch=0&name={urllib.parse.quote(p['name'], safe='')}"
        )
        SimpleUpload(url).transmit(session, p["data"], p["content_type"])
        return
    blob = bucket.blob(p["name"], chunk_size=p["chunk_size"])
    blob.metadata = p["metadata"]
    blob.cache_control = p["cache_control"]
    if p["kind"] == "multipart":
        blob.upload_from_string(
            p["data"], content_type=p["content_type"], if_generation_match=0, checksum="crc32c"
        )
    else:
        blob.upload_from_file(
            io.BytesIO(p["data"]),
            content_type=p["content_type"],
            if_generation_match=0,
            checksum="crc32c",
        )


def digests(data):
    md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    crc = base64.b64encode(struct.pack(">I", google_crc32c.value(data))).decode()
    return md5, crc


def watch_refused(record):
    """Calls `record(error)` for every connection refused, where urllib3 (under the
    client's requests session) connects: observed, not changed."""
    import urllib3.util.connection as connection

    create = connection.create_connection

    def create_connection(*args, **kwargs):
        try:
            return create(*args, **kwargs)
        except ConnectionRefusedError as e:
            record(e)
            raise

    connection.create_connection = create_connection


def watch_stdin(stop):
    """Sets `stop` once standard input closes."""
    sys.stdin.buffer.read()
    stop.set()


def main():
    args = arguments()
    stop = threading.Event()
    threading.Thread(target=watch_stdin, args=(stop,), daemon=True).start()
    client = storage.Client(
        project="torture",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": args.endpoint},
    )
    bucket = client.bucket(args.bucket)
    session = AuthorizedSession(AnonymousCredentials())
    rng = random.Random(args.seed)
    with open(args.log, "a", encoding="utf-8") as log:

        def append(line):
            log.write(json.dumps(line) + "\n")
            log.flush()

        seq = 0

        def refused(e):
            line = {"ev": "refused", "writer": args.writer, "seq": seq, "t": unix_ms()}
            append({**line, "error": describe(e)[:2000]})

        watch_refused(refused)
        while not stop.is_set():
            p = plan(rng, args, seq)
            md5, crc = digests(p["data"])
            common = {"writer": args.writer, "seq": seq, "name": p["name"]}
            begin = {"ev": "begin", **common, "t": unix_ms(), "kind": p["kind"]}
            begin.update(size=len(p["data"]), md5=md5, crc32c=crc)
            begin.update(contentType=p["content_type"], cacheControl=p["cache_control"])
            begin.update(metadata=p["metadata"])
            append(begin)
            started = time.monotonic()
            end = {"ev": "end", **common}
            try:
                upload(args, bucket, session, p)
                end.update(answer="ok")
            except Exception as e:  # every failure is an answer to record
                code = getattr(e, "code", None)
                if not isinstance(code, int):
                    response = getattr(e, "response", None)
                    code = getattr(response, "status_code", None)
                end.update(answer="error", error=describe(e)[:2000], code=code)
            end.update(t=unix_ms(), ms=int((time.monotonic() - started) * 1000))
            append(end)
            seq += 1
    return 0


def describe(e):
    """The exception's type and text, with the one it was raised while handling:
    a failed resumable upload can end in the client's own clean-up failing (it
    deletes an object whose checksum did not match), which would hide the cause."""
    text = f"{type(e).__name__}: {e}"
    if e.__context__ is not None and e.__context__ is not e:
        text += f" (while handling {type(e.__context__).__name__}: {e.__context__})"
    return text


def unix_ms():
    return int(time.time() * 1000)


if __name__ == "__main__":
    sys.exit(main())
