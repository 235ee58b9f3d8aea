"""The everyday tools people point at a bucket, each in its natural workflow, straight
to fake-gcs, through spool-relay in front of it, and through the relay while the
fake fails every write and then heals (clients/tools/run starts this after
installing the tools; docs/relay.md, "The tools people use").

Each tool writes under its own prefix, `<tool>/<column>/`, and what it says it
wrote is compared with the bucket, read straight from the fake (after the relay's
spool has drained): every file by its crc32c and size (an object over 8 MiB
written through the relay is an XML multipart upload, which has no MD5 in Cloud
Storage either). A cell passes when the tool's
workflow succeeded and the bucket holds everything it wrote.

- rclone (Debian's): `copy` of a tree of 24 files (an empty one, a text with a
  blank line, one whose last byte is a CR, one 20 MiB file) and then a second
  `copy` of the same tree, which
  must transfer nothing new; then `sync` of the tree with one file edited and one
  removed: one object replaced (an overwrite), one deleted.
- gcsfs under pandas: `DataFrame.to_parquet` and `read_parquet` back, and
  `fs.put(tree, recursive=True)`.
- pyarrow's `GcsFileSystem` (Google's C++ client): `open_output_stream`,
  `pyarrow.dataset.write_dataset` of a table partitioned in three, and
  `pyarrow.fs.copy_files` of the tree.
- the official Python client: `transfer_manager.upload_many_from_filenames` of the
  tree (threads) and `upload_from_filename` of the 20 MiB file under another name.
- the official Node client: `bucket.upload` of every file of the tree and
  `createWriteStream` of the 20 MiB file under another name
  (clients/tools/node_tool.js, with clients/node's pinned packages).
- the Go client (Debian's golang-google-cloud-dev): an object's `Writer` for every
  file of the tree (clients/tools/go_tool; its 16 MiB chunks make the 20 MiB file a
  resumable upload sent with `X-Guploader-No-308`).
- gsutil (PyPI): `-m cp -r` of the tree, `ls -l` of it, and `-m cp -n -r` again,
  which must skip every file. gsutil speaks only HTTPS to the JSON API: it writes
  to a second fake and a second relay that serve HTTPS (`--tls-cert`, a
  certificate made here for 127.0.0.1), trusting that certificate.

Usage: run.py --fake-bin PATH --relay-bin PATH --bucket NAME --work DIR [--tools a,b]
       [--columns direct,relay,outage] [--known-failing tool:column,...]

A cell named in --known-failing must fail (it is shown as "known" in the table,
with why it fails in docs/relay.md); the run fails when one passes, so that the
list shrinks as the relay learns.
"""

import argparse
import base64
import datetime
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import traceback
import urllib.parse
import urllib.request

import google_crc32c

TOOLS = ["rclone", "gcsfs", "pyarrow", "python", "node", "go", "gsutil"]
# Tools that speak only HTTPS.
HTTPS_ONLY = {"gsutil"}
COLUMNS = ["direct", "relay", "outage"]
BIG_BYTES = 20 << 20


def tree(root):
    """A tree of files: 20 small, an empty one, a text with a blank line in it (a
    multipart parser that looks for the blank line in the data cuts it), a text
    whose last byte is a CR, and one of 20 MiB (over rclone's and the Go client's
    16 MiB chunk). Returns the relative paths and their MD5s."""
    os.makedirs(os.path.join(root, "sub"), exist_ok=True)
    files = {}
    for i in range(1, 21):
        files[f"f{i:02}.bin"] = bytes((i * 7 + j) % 251 for j in range(i * 997))
    files["sub/empty"] = b""
    files["sub/text.txt"] = b"hello\n\nworld\n"
    # Its last byte a CR: gsutil frames multipart bodies with bare \n, and a
    # parser that reads CR LF before the closing delimiter dropped it (issue 53).
    files["sub/ends-in-cr.txt"] = b"a line that ends in a carriage return\r"
    files["sub/big.bin"] = os.urandom(BIG_BYTES)
    digests = {}
    for rel, data in files.items():
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
        digests[rel] = digest(data)
    return digests


def digest(data):
    """What the bucket must hold for `data`: its crc32c (base64, as the JSON API
    gives it) and size."""
    crc = google_crc32c.value(data).to_bytes(4, "big")
    return f"{base64.b64encode(crc).decode()}/{len(data)}"


def bucket_objects(fake, bucket, prefix):
    """{name: crc32c/size} of every object under `prefix`, read from the fake."""
    out, token = {}, None
    while True:
        query = {"prefix": prefix, "maxResults": "1000"}
        if token:
            query["pageToken"] = token
        url = f"{fake}/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(query)}"
        with urlopen(url) as r:
            page = json.load(r)
        for item in page.get("items", []):
            out[item["name"]] = f"{item.get('crc32c')}/{item.get('size')}"
        token = page.get("nextPageToken")
        if not token:
            return out


def wait_for(fake, bucket, expected, seconds=120):
    """Waits until the bucket holds every object of `expected` ({name: digest}) with its
    bytes; returns what is missing or different (empty when all is there)."""
    deadline = time.monotonic() + seconds
    while True:
        prefix = os.path.commonprefix(list(expected))
        held = bucket_objects(fake, bucket, prefix)
        wrong = {n: (m, held.get(n)) for n, m in expected.items() if held.get(n) != m}
        if not wrong or time.monotonic() > deadline:
            return wrong
        time.sleep(0.5)


def run(cmd, env=None, timeout=600):
    """Runs `cmd`, returning its output; raises with the output when it fails."""
    p = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if p.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        )
    return p.stdout + p.stderr


# -- the tools ---------------------------------------------------------------


def rclone(endpoint, bucket, prefix, local, digests):
    """`rclone copy` of the tree, then again: the second must copy nothing."""
    flags = [
        f"--gcs-endpoint={endpoint}/storage/v1/",
        "--gcs-anonymous",
        # Without it rclone sends predefinedAcl=private, which a bucket with uniform
        # bucket-level access (the default) refuses, and so does the relay.
        "--gcs-bucket-policy-only",
        "--use-json-log",
        "-v",
        "--retries=3",
    ]
    dest = f":gcs:{bucket}/{prefix}"
    first = run(["rclone", "copy", local, dest, *flags])
    copied = len(re.findall(r'"msg":"Copied \(new\)', first))
    if copied != len(digests):
        raise RuntimeError(f"the first copy copied {copied} of {len(digests)} files")
    second = run(["rclone", "copy", local, dest, *flags])
    again = [line for line in second.splitlines() if '"msg":"Copied' in line]
    if again:
        raise RuntimeError(f"the second copy copied {len(again)} files again: {again[:2]}")
    # An edit synced: rclone rewrites the object without a precondition, which the
    # relay refused (412, create-if-absent) before issue 53; sync then skipped its
    # deletions. The tree is copied, so the other tools see it as it was.
    edited = local.rstrip("/") + "-edited-" + prefix.replace("/", "-")
    shutil.rmtree(edited, ignore_errors=True)
    shutil.copytree(local, edited)
    rel = "sub/text.txt"
    with open(os.path.join(edited, rel), "rb") as f:
        data = f.read() + b"an edited line\n"
    with open(os.path.join(edited, rel), "wb") as f:
        f.write(data)
    os.remove(os.path.join(edited, "f01.bin"))
    third = run(["rclone", "sync", edited, dest, *flags])
    replaced = re.findall(r'"msg":"Copied \(replaced existing\)', third)
    deleted = re.findall(r'"msg":"Deleted"', third)
    if (len(replaced), len(deleted)) != (1, 1):
        raise RuntimeError(
            f"the sync of an edit replaced {len(replaced)} files (1 expected) and "
            f"deleted {len(deleted)} (1 expected): {third[-1500:]}"
        )
    expected = {prefix + r: d for r, d in digests.items() if r != "f01.bin"}
    expected[prefix + rel] = digest(data)
    return expected, "2 copies, the second copied nothing; a sync of an edit replaced 1 file and deleted 1"


def gcsfs_pandas(endpoint, bucket, prefix, local, digests):
    """pandas' to_parquet and read_parquet through gcsfs, and fs.put of the tree."""
    # gcsfs 2026 first asks the bucket's storage layout over gRPC with TLS (the
    # storage control API, for zonal and hierarchical buckets), which no emulator
    # speaks: 60 s per lookup before it falls back. Users of an emulator turn it off.
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
    import gcsfs
    import pandas as pd

    fs = gcsfs.GCSFileSystem(token="anon", endpoint_url=endpoint, retries=3)
    frame = pd.DataFrame({"n": range(1000), "s": [f"row {i}" for i in range(1000)]})
    path = f"gs://{bucket}/{prefix}frame.parquet"
    options = {"token": "anon", "endpoint_url": endpoint}
    frame.to_parquet(path, storage_options=options)
    back = pd.read_parquet(path, storage_options=options)
    if not back.equals(frame):
        raise RuntimeError("read_parquet gave back another frame")
    fs.invalidate_cache()
    fs.put(local + "/", f"{bucket}/{prefix}tree/", recursive=True)
    expected = {f"{prefix}tree/{rel}": d for rel, d in digests.items()}
    with fs.open(path, "rb") as f:
        expected[f"{prefix}frame.parquet"] = digest(f.read())
    return expected, "to_parquet, read_parquet equal, fs.put of the tree"


def pyarrow_fs(endpoint, bucket, prefix, local, digests):
    """pyarrow's GcsFileSystem: a stream, a partitioned dataset, copy_files."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    url = urllib.parse.urlparse(endpoint)
    gcs = pafs.GcsFileSystem(
        anonymous=True, scheme=url.scheme, endpoint_override=url.netloc, retry_time_limit=datetime.timedelta(seconds=60)
    )
    data = os.urandom(300_000)
    with gcs.open_output_stream(f"{bucket}/{prefix}stream.bin") as out:
        out.write(data)
    expected = {f"{prefix}stream.bin": digest(data)}
    table = pa.table({"part": [i % 3 for i in range(3000)], "n": list(range(3000))})
    ds.write_dataset(
        table,
        f"{bucket}/{prefix}dataset",
        format="parquet",
        partitioning=["part"],
        filesystem=gcs,
    )
    back = ds.dataset(f"{bucket}/{prefix}dataset", format="parquet", filesystem=gcs, partitioning=["part"])
    if back.count_rows() != 3000:
        raise RuntimeError(f"the dataset read back has {back.count_rows()} rows")
    pafs.copy_files(local, f"{bucket}/{prefix}tree", destination_filesystem=gcs)
    # The tree's empty file and directories: copy_files writes every file.
    expected.update({f"{prefix}tree/{rel}": d for rel, d in digests.items()})
    return expected, "a stream, write_dataset (3 parts) read back, copy_files of the tree"


def gsutil(endpoint, bucket, prefix, local, digests):
    """gsutil -m cp -r of the tree, ls -l, and cp -n -r again (skips everything)."""
    url = urllib.parse.urlparse(endpoint)
    host, port = url.hostname, str(url.port)
    binary = os.path.join(os.path.dirname(sys.executable), "gsutil")
    flags = [
        "-o", f"Credentials:gs_json_host={host}", "-o", f"Credentials:gs_json_port={port}",
        "-o", f"Credentials:gs_host={host}", "-o", f"Credentials:gs_port={port}",
        "-o", f"Boto:ca_certificates_file={CA_FILE}",
    ]
    dest = f"gs://{bucket}/{prefix}"
    run([binary, *flags, "-m", "cp", "-r", local, dest])
    listing = run([binary, *flags, "ls", "-l", dest + "**"])
    if f"TOTAL: {len(digests)} objects" not in listing:
        raise RuntimeError(f"ls -l did not list {len(digests)} objects:\n{listing[-1500:]}")
    again = run([binary, *flags, "-m", "cp", "-n", "-r", local, dest])
    skipped = again.count("Skipping existing item")
    if skipped != len(digests):
        raise RuntimeError(f"cp -n skipped {skipped} of {len(digests)} files:\n{again[-1500:]}")
    tree_name = os.path.basename(local.rstrip("/"))
    expected = {f"{prefix}{tree_name}/{rel}": d for rel, d in digests.items()}
    return expected, "-m cp -r, ls -l, cp -n -r skipping every file"


def python_client(endpoint, bucket, prefix, local, digests):
    """The official Python client: transfer_manager over the tree, a 20 MiB file."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage
    from google.cloud.storage import transfer_manager

    client = storage.Client(
        project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": endpoint}
    )
    target = client.bucket(bucket)
    names = sorted(digests)
    results = transfer_manager.upload_many_from_filenames(
        target, names, source_directory=local, blob_name_prefix=f"{prefix}tree/",
        worker_type=transfer_manager.THREAD, max_workers=4, raise_exception=True,
    )
    failed = [(n, r) for n, r in zip(names, results) if r is not None]
    if failed:
        raise RuntimeError(f"upload_many_from_filenames failed for {failed[:3]}")
    big = max(names, key=lambda n: int(digests[n].rsplit("/", 1)[1]))
    target.blob(f"{prefix}file/{big}").upload_from_filename(os.path.join(local, big))
    expected = {f"{prefix}tree/{rel}": d for rel, d in digests.items()}
    expected[f"{prefix}file/{big}"] = digests[big]
    return expected, f"upload_many_from_filenames of the tree, upload_from_filename of {big}"


def node_client(endpoint, bucket, prefix, local, digests):
    """The official Node client: bucket.upload of the tree, createWriteStream."""
    script = os.path.join(REPO, "clients", "tools", "node_tool.js")
    env = dict(os.environ, NODE_PATH=os.path.join(REPO, "clients", "node", "node_modules"))
    out = run(["node", script, endpoint, bucket, prefix, local], env=env)
    said = json.loads(out.strip().splitlines()[-1])
    streamed = said["streamed"]
    expected = {f"{prefix}tree/{rel}": d for rel, d in digests.items()}
    expected[f"{prefix}stream/{streamed}"] = digests[streamed]
    if set(said["uploaded"]) != set(expected):
        raise RuntimeError(f"the client uploaded {sorted(said['uploaded'])[:5]}..., not the tree")
    return expected, f"bucket.upload of the tree, createWriteStream of {streamed}"


def go_client(endpoint, bucket, prefix, local, digests):
    """The Go client: an object Writer per file of the tree (clients/tools/go_tool)."""
    out = run([os.environ["GO_TOOL"], endpoint, bucket, prefix, local])
    said = json.loads(out.strip().splitlines()[-1])
    expected = {f"{prefix}tree/{rel}": d for rel, d in digests.items()}
    if set(said["uploaded"]) != set(expected):
        raise RuntimeError(f"the client uploaded {sorted(said['uploaded'])[:5]}..., not the tree")
    return expected, "a Writer per file of the tree (the 20 MiB file in 16 MiB chunks)"


RUNNERS = {
    "rclone": rclone,
    "gcsfs": gcsfs_pandas,
    "pyarrow": pyarrow_fs,
    "python": python_client,
    "node": node_client,
    "go": go_client,
    "gsutil": gsutil,
}

# The repository's root (clients/tools/run.py's grandparent).
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The certificate the HTTPS fake and relay serve, and the tools trust (set in main).
CA_FILE = None


def make_certificate(work):
    """A certificate authority and a server certificate it signs for 127.0.0.1 and
    localhost. Returns (ca.pem, server.pem, server key.pem): clients trust the first
    (a verifier such as webpki refuses a CA certificate used as the server's own), the
    servers serve the second with the third."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    now = datetime.datetime.now(datetime.timezone.utc)

    def builder(subject, issuer, public_key):
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2))
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tool checks CA")])
    ca = (
        builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    cert = (
        builder(name, ca_name, key.public_key())
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = [os.path.join(work, f) for f in ("ca.pem", "cert.pem", "key.pem")]
    with open(paths[0], "wb") as f:
        f.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(paths[1], "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(paths[2], "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return tuple(paths)


# -- the relay and the fake ---------------------------------------------------


def urlopen(req, timeout=30):
    """urllib's urlopen, trusting CA_FILE for https."""
    url = req if isinstance(req, str) else req.full_url
    context = ssl.create_default_context(cafile=CA_FILE) if url.startswith("https") else None
    return urllib.request.urlopen(req, timeout=timeout, context=context)


class Process:
    """A binary of the workspace started with `args`, its log in `work/NAME.log`,
    and the fields of its first "listening" line."""

    def __init__(self, name, argv, work, env=None):
        self.log_path = os.path.join(work, f"{name}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, env=env
        )

    def field(self, name):
        for _ in range(100):
            with open(self.log_path) as f:
                m = re.search(rf"listening.* {name}=(\S+)", f.read())
            if m:
                return m.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        tail = open(self.log_path).read()[-3000:]
        raise RuntimeError(f"{self.log_path}: no {name}= in a listening line:\n{tail}")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


class Fake(Process):
    """fake-gcs with the bucket, over HTTPS when `tls` is (cert, key)."""

    def __init__(self, binary, bucket, work, name, tls=None):
        argv = [binary, "--listen", "127.0.0.1:0", "--bucket", bucket]
        if tls:
            argv += ["--tls-cert", tls[0], "--tls-key", tls[1]]
        super().__init__(name, argv, work)
        self.url = ("https://" if tls else "http://") + self.field("addr")


class Relay(Process):
    """spool-relay in front of `fake`, over HTTPS when `tls` is (cert, key)."""

    def __init__(self, binary, fake, bucket, work, name, tls=None):
        spool = os.path.join(work, f"{name}-spool")
        shutil.rmtree(spool, ignore_errors=True)
        argv = [binary, "--dir", spool, "--upstream", f"gs://{bucket}", "--endpoint", fake,
                "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--backoff-cap", "1s"]
        env = None
        if tls:
            argv += ["--tls-cert", tls[0], "--tls-key", tls[1]]
            # Its upstream, the fake, serves the same certificate: the relay's clients
            # verify with the platform's roots, which SSL_CERT_FILE replaces.
            env = dict(os.environ, SSL_CERT_FILE=CA_FILE)
        super().__init__(name, argv, work, env)
        self.url = ("https://" if tls else "http://") + self.field("addr")
        self.metrics = "http://" + self.field("metrics") + "/metrics"

    def spooled(self):
        """How many uploads the relay has answered spooled so far."""
        with urlopen(self.metrics) as r:
            text = r.read().decode()
        m = re.search(r'^spool_uploads_total\{outcome="spooled"\} (\d+)', text, re.M)
        return int(m.group(1)) if m else 0


def faults(fake, on):
    if on:
        body = b'[[fault]]\nmix = { "503" = 1.0 }'
        req = urllib.request.Request(f"{fake}/_fake/faults", data=body, method="POST")
    else:
        req = urllib.request.Request(f"{fake}/_fake/faults", method="DELETE")
    urlopen(req).read()


def cell(tool, column, fake, relay, bucket, local, digests):
    """Runs one tool in one column; returns (passed, what)."""
    prefix = f"{tool}/{column}/"
    endpoint = fake if column == "direct" else relay.url
    spooled_before = relay.spooled() if relay else 0
    if column == "outage":
        faults(fake, True)
    try:
        expected, what = RUNNERS[tool](endpoint, bucket, prefix, local, digests)
    finally:
        if column == "outage":
            faults(fake, False)
    if column == "outage":
        # Every write of the tool met the outage: the relay spooled what it took.
        spooled = relay.spooled() - spooled_before
        if spooled == 0:
            return False, "nothing was spooled: the outage did not reach the writes"
        what += f"; {spooled} uploads spooled"
    wrong = wait_for(fake, bucket, expected)
    if wrong:
        sample = dict(list(wrong.items())[:3])
        return False, f"{len(wrong)} of {len(expected)} objects not in the bucket as written: {sample}"
    return True, f"{what}; {len(expected)} objects in the bucket as written"


def main():
    global CA_FILE
    p = argparse.ArgumentParser()
    p.add_argument("--fake-bin", required=True)
    p.add_argument("--relay-bin", required=True)
    p.add_argument("--bucket", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--columns", default=",".join(COLUMNS))
    p.add_argument("--known-failing", default="")
    args = p.parse_args()
    known = {tuple(k.split(":", 1)) for k in args.known_failing.split(",") if ":" in k}
    tools = [t for t in args.tools.split(",") if t]
    columns = [c for c in args.columns.split(",") if c]
    local = os.path.join(args.work, "tree")
    shutil.rmtree(local, ignore_errors=True)
    digests = tree(local)
    started = []
    results = {}
    try:
        # Each side: a fake, and a relay in front of it when a column needs one.
        sides = {}
        relays = bool(set(columns) - {"direct"})
        if set(tools) - HTTPS_ONLY:
            fake = Fake(args.fake_bin, args.bucket, args.work, "fake")
            started.append(fake)
            relay = Relay(args.relay_bin, fake.url, args.bucket, args.work, "relay") if relays else None
            started += [relay] if relay else []
            sides[False] = (fake, relay)
        if set(tools) & HTTPS_ONLY:
            CA_FILE, *tls = make_certificate(args.work)
            fake = Fake(args.fake_bin, args.bucket, args.work, "fake-https", tls)
            started.append(fake)
            relay = None
            if relays:
                relay = Relay(args.relay_bin, fake.url, args.bucket, args.work, "relay-https", tls)
                started.append(relay)
            sides[True] = (fake, relay)
        for column in columns:
            for tool in tools:
                fake, relay = sides[tool in HTTPS_ONLY]
                began = time.monotonic()
                try:
                    passed, what = cell(tool, column, fake.url, relay, args.bucket, local, digests)
                except Exception as e:  # the tool failed: say how
                    passed, what = False, f"{type(e).__name__}: {str(e)[-1500:]}"
                    traceback.print_exc()
                took = time.monotonic() - began
                results[(tool, column)] = passed
                print(f"{'ok  ' if passed else 'FAIL'} {tool:8} {column:7} {took:5.1f}s  {what}", flush=True)
    finally:
        for process in reversed(started):
            process.stop()
    print()
    print("| tool | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))

    def shown(tool, column):
        passed = results[(tool, column)]
        if (tool, column) in known:
            return "known failure" if not passed else "PASSED (known failing: remove it)"
        return "pass" if passed else "FAIL"

    for tool in tools:
        print(f"| {tool} | " + " | ".join(shown(tool, c) for c in columns) + " |")
    failed = [k for k, v in results.items() if not v and k not in known]
    unexpected = [k for k, v in results.items() if v and k in known]
    passed = sum(results.values())
    print(f"\n{passed} of {len(results)} cells passed ({len(results) - passed - len(failed)} known failures)")
    if unexpected:
        print(f"passed but listed as known failing: {unexpected}")
    return 1 if failed or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
