"""Writes through a spool-relay that requires a token, with google-cloud-storage as a
service would configure it: the token is the access token of
google.oauth2.credentials.Credentials, and client_options names the relay.

    python clients/python/auth_demo.py --endpoint http://127.0.0.1:4443 --bucket BUCKET \\
        --token-file /etc/spool-relay/token     # or SPOOL_RELAY_TOKEN in the environment

Writes one object in one request and one in a resumable session (256 KiB chunks),
each create-if-absent; prints one line per object and exits 0, or prints the
client's error and exits 1.
"""

import argparse
import os
import sys
import time

from google.cloud import storage
from google.oauth2.credentials import Credentials


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--token-file")
    parser.add_argument("--prefix", default=f"auth-demo/python-{os.getpid()}-{int(time.time() * 1000)}")
    opts = parser.parse_args()
    if opts.token_file:
        with open(opts.token_file, encoding="utf-8") as f:
            token = f.read().strip()
    else:
        token = os.environ.get("SPOOL_RELAY_TOKEN", "").strip()
    if not token:
        print("no token: give --token-file PATH or set SPOOL_RELAY_TOKEN", file=sys.stderr)
        return 2

    client = storage.Client(
        project="spool-relay-demo",
        credentials=Credentials(token=token),
        client_options={"api_endpoint": opts.endpoint},
    )
    bucket = client.bucket(opts.bucket)
    try:
        small = bucket.blob(f"{opts.prefix}/one-request.txt")
        small.upload_from_string(b"written with a bearer token\n", if_generation_match=0)
        print(f"ok python: {small.name} (one request, Authorization: Bearer)")

        data = b"r" * (600 * 1024)
        large = bucket.blob(f"{opts.prefix}/resumable.bin", chunk_size=256 * 1024)
        large.upload_from_string(data, if_generation_match=0)
        print(f"ok python: {large.name} (resumable session, {len(data)} bytes)")
    except Exception as e:  # the client's own error, as a user would see it
        print(f"FAIL python: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
