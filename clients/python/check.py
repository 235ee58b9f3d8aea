#!/usr/bin/env python3
"""Checks the official Python client, google-cloud-storage, against a server that
speaks Cloud Storage's JSON API: fake-gcs, or later a relay that takes the same
uploads. Each check prints `ok` or `FAIL` with the reason; the exit status is 1
when any check fails.

    python check.py --endpoint http://127.0.0.1:4443 --bucket bkt [--only a,b] [--prefix p/]
    python check.py --endpoint http://127.0.0.1:4443 --bucket bkt --suite uploads --manifest FILE

The endpoint and bucket may also come from GCS_ENDPOINT and GCS_BUCKET (or
STORAGE_EMULATOR_HOST for the endpoint). `--only` (or GCS_CHECKS) runs a subset,
for a server that serves only part of the API; `--list` names the checks. Objects
are written under a fresh prefix (python-<time>-<pid>/ unless --prefix), so runs do
not collide on a server that keeps its objects.

`--suite uploads` (or GCS_SUITE) is for a server that takes uploads but serves no
reads, such as spool-relay: it runs the upload checks (UPLOAD_CHECKS) and skips
their read-backs. `--manifest FILE` (or GCS_MANIFEST) appends one JSON line per
object a check wrote (name, size, md5Hash, content type, attributes), so that a
later step can check each one where it ended up (clients/relay_check.py).
"""

import argparse
import base64
import datetime
import gzip
import hashlib
import io
import json
import os
import sys
import time
import urllib.parse
from importlib.metadata import version

from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.auth.transport.requests import AuthorizedSession
from google.cloud import storage
from google.resumable_media.requests import SimpleUpload


class Context:
    """What every check gets: the client, the bucket, the endpoint, object names."""

    def __init__(self, endpoint, bucket, prefix, writes_only=False, manifest=None):
        self.endpoint = endpoint.rstrip("/")
        self.writes_only = writes_only
        self.manifest = manifest
        self.client = storage.Client(
            project="test",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.endpoint},
        )
        self.bucket = self.client.bucket(bucket)
        self.prefix = prefix

    def name(self, suffix):
        return self.prefix + suffix

    def record(self, name, data, **attributes):
        """Appends what the object written as `name` must hold to the manifest, if
        any (attributes under their JSON API names)."""
        if not self.manifest:
            return
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
        entry = {"client": "python", "name": name, "size": len(data), "md5Hash": md5}
        entry.update(attributes)
        with open(self.manifest, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def payload(size=300 * 1024):
    """Bytes that differ per run."""
    return os.urandom(size)


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def simple_upload(ctx):
    """uploadType=media, with the media upload class the client is built on (the
    client's own upload methods use multipart or resumable uploads only)."""
    data = payload()
    name = ctx.name("simple.bin")
    url = (
        f"{ctx.endpoint}/upload/storage/v1/b/{urllib.parse.quote(ctx.bucket.name, safe='')}/o"
        f"?uploadType=media&ifGenerationMatch=0&name={urllib.parse.quote(name, safe='')}"
    )
    upload = SimpleUpload(url)
    response = upload.transmit(
        AuthorizedSession(AnonymousCredentials()), data, "application/octet-stream"
    )
    resource = response.json()
    expect(resource["name"] == name, f"stored as {resource['name']!r}")
    ctx.record(name, data, contentType="application/octet-stream")
    if ctx.writes_only:
        return
    downloaded = ctx.bucket.blob(name).download_as_bytes(checksum="crc32c")
    expect(downloaded == data, "the downloaded bytes differ")


def multipart_upload(ctx):
    """upload_from_string: one multipart request, the name only in the metadata."""
    data = payload()
    blob = ctx.bucket.blob(ctx.name("multipart.bin"))
    blob.upload_from_string(data, if_generation_match=0, checksum="crc32c")
    ctx.record(blob.name, data)
    if ctx.writes_only:
        return
    blob.reload()
    expect(blob.size == len(data), f"size {blob.size}, not {len(data)}")


def resumable_upload(ctx):
    """A stream of unknown size is uploaded resumably (at most 8 MiB of known size
    goes multipart): a session, filled in 256 KiB chunks (the blob's chunk size)."""
    data = payload(700 * 1024)
    blob = ctx.bucket.blob(ctx.name("resumable.bin"), chunk_size=256 * 1024)
    blob.upload_from_file(io.BytesIO(data), if_generation_match=0, checksum="crc32c")
    ctx.record(blob.name, data)
    if ctx.writes_only:
        return
    downloaded = ctx.bucket.blob(blob.name).download_as_bytes()
    expect(downloaded == data, "the downloaded bytes differ")


def download_validated(ctx):
    """Downloads validated by crc32c and by MD5, whole and by range."""
    data = payload()
    blob = ctx.bucket.blob(ctx.name("validated.bin"))
    blob.upload_from_string(data, checksum="md5")
    for checksum in ("crc32c", "md5"):
        downloaded = blob.download_as_bytes(checksum=checksum)
        expect(downloaded == data, f"the bytes validated by {checksum} differ")
    part = blob.download_as_bytes(start=10, end=19)
    expect(part == data[10:20], "the range differs")


def attributes(ctx):
    """Content type, encoding, cache control, disposition, language and custom
    metadata come back as given; gzip bytes are served as stored."""
    data = gzip.compress(b"a,b\n1,2\n" * 100)
    name = ctx.name("attributes.csv.gz")
    blob = ctx.bucket.blob(name)
    given = {
        "content_type": "text/csv",
        "content_encoding": "gzip",
        "cache_control": "no-store",
        "content_disposition": 'attachment; filename="a.csv"',
        "content_language": "fr",
        "metadata": {"owner": "python", "run": "7"},
    }
    for key, value in given.items():
        setattr(blob, key, value)
    blob.upload_from_string(data, content_type=given["content_type"])
    ctx.record(
        name,
        data,
        contentType=given["content_type"],
        contentEncoding=given["content_encoding"],
        cacheControl=given["cache_control"],
        contentDisposition=given["content_disposition"],
        contentLanguage=given["content_language"],
        metadata=given["metadata"],
    )
    if ctx.writes_only:
        return
    stored = ctx.bucket.get_blob(name)
    for key, value in given.items():
        got = getattr(stored, key)
        expect(got == value, f"{key} came back as {got!r}")
    raw = stored.download_as_bytes(raw_download=True)
    expect(raw == data, "the stored bytes differ")


def list_objects(ctx):
    """list_blobs with a prefix lists exactly the objects under it, in name order;
    with a delimiter, the common prefixes."""
    names = [ctx.name(n) for n in ("list/b", "list/a", "list/c/d")]
    for name in names:
        ctx.bucket.blob(name).upload_from_string(b"x")
    listed = [b.name for b in ctx.client.list_blobs(ctx.bucket, prefix=ctx.name("list/"))]
    expect(listed == sorted(names), f"listed {listed}")
    folded = ctx.client.list_blobs(ctx.bucket, prefix=ctx.name("list/"), delimiter="/")
    objects = [b.name for b in folded]
    expect(folded.prefixes == {ctx.name("list/c/")}, f"prefixes {folded.prefixes}")
    expect(objects == sorted(names[:2]), f"objects beside the prefixes {objects}")


def list_filters(ctx):
    """list_blobs's end_offset stops before its name, match_glob keeps `*` within a
    segment and `**` across, include_trailing_delimiter lists a folder object
    beside its prefix (each ignored by fake-gcs before issue 41)."""
    base = ctx.name("filters/")
    names = [base + n for n in ("a.txt", "b.csv", "d/", "d/e.txt", "d/f/g.txt")]
    for name in names:
        ctx.bucket.blob(name).upload_from_string(b"x")

    def listed(**kwargs):
        return [b.name for b in ctx.client.list_blobs(ctx.bucket, prefix=base, **kwargs)]

    got = listed(end_offset=base + "d/")
    expect(got == names[:2], f"end_offset listed {got}")
    got = listed(match_glob=base + "*.txt")
    expect(got == [names[0]], f"match_glob *.txt listed {got}")
    got = listed(match_glob=base + "**/g.txt")
    expect(got == [names[4]], f"match_glob **/g.txt listed {got}")
    got = listed(match_glob=base + "d/*")
    expect(got == names[2:4], f"match_glob d/* listed {got}")
    folded = ctx.client.list_blobs(
        ctx.bucket, prefix=base, delimiter="/", include_trailing_delimiter=True
    )
    objects = [b.name for b in folded]
    expect(objects == names[:3], f"include_trailing_delimiter listed {objects}")
    expect(folded.prefixes == {base + "d/"}, f"prefixes {folded.prefixes}")


def delete(ctx):
    """delete() removes the object; a second delete is NotFound."""
    blob = ctx.bucket.blob(ctx.name("delete.bin"))
    blob.upload_from_string(b"x")
    blob.delete()
    expect(not blob.exists(), "the object still exists")
    try:
        blob.delete()
    except exceptions.NotFound:
        return
    raise AssertionError("a second delete succeeded")


def precondition(ctx):
    """if_generation_match=0 on an object that exists is 412 (PreconditionFailed)
    and the object keeps its bytes; the live generation's match succeeds."""
    blob = ctx.bucket.blob(ctx.name("precondition.bin"))
    blob.upload_from_string(b"first", if_generation_match=0)
    try:
        blob.upload_from_string(b"second", if_generation_match=0)
    except exceptions.PreconditionFailed:
        pass
    else:
        raise AssertionError("the second create succeeded")
    expect(blob.download_as_bytes() == b"first", "the object lost its bytes")
    blob.reload()
    blob.upload_from_string(b"third", if_generation_match=blob.generation)


def compose(ctx):
    """compose() makes a composite object: no MD5, a component count, and a
    download the client validates by crc32c."""
    parts = [ctx.bucket.blob(ctx.name(n)) for n in ("compose/1", "compose/2")]
    parts[0].upload_from_string(b"hello ")
    parts[1].upload_from_string(b"world")
    composite = ctx.bucket.blob(ctx.name("compose/all"))
    composite.compose(parts, if_generation_match=0)
    composite.reload()
    expect(composite.component_count == 2, f"componentCount {composite.component_count}")
    expect(composite.md5_hash is None, f"md5Hash {composite.md5_hash}")
    downloaded = composite.download_as_bytes(checksum="crc32c")
    expect(downloaded == b"hello world", f"composed {downloaded!r}")


def fresh_bucket(ctx, what):
    """A bucket name no run used before: created buckets outlive a run."""
    return f"py-{what}-{int(time.time() * 1000)}-{os.getpid()}"


def holds(ctx):
    """Holds and retention as Cloud Storage enforces them: a bucket's
    defaultEventBasedHold holds each new object; an object under an event-based or
    temporary hold cannot be deleted or overwritten (403) until the hold is
    released; under a retention policy an object has its retentionExpirationTime
    and cannot be deleted before it (that object is left in its bucket)."""
    held = ctx.client.bucket(fresh_bucket(ctx, "held"))
    held.default_event_based_hold = True
    held.create()
    blob = held.blob("e")
    blob.upload_from_string(b"event")
    blob.reload()
    expect(blob.event_based_hold is True, f"eventBasedHold {blob.event_based_hold}")
    for attempt in (blob.delete, lambda: blob.upload_from_string(b"other")):
        try:
            attempt()
        except exceptions.Forbidden as e:
            expect("Event-Based hold" in str(e), f"the refusal says {e}")
        else:
            raise AssertionError("a held object was deleted or overwritten")
    blob.event_based_hold = False
    blob.patch()
    blob.delete()

    plain = held.blob("t")
    plain.upload_from_string(b"temporary")
    plain.event_based_hold = False
    plain.temporary_hold = True
    plain.patch()
    try:
        plain.delete()
    except exceptions.Forbidden as e:
        expect("Temporary hold" in str(e), f"the refusal says {e}")
    else:
        raise AssertionError("an object under a temporary hold was deleted")
    plain.temporary_hold = False
    plain.patch()
    plain.delete()
    held.delete()

    kept = ctx.client.bucket(fresh_bucket(ctx, "kept"))
    kept.retention_period = 3600
    kept.create()
    retained = kept.blob("r")
    retained.upload_from_string(b"retained")
    retained.reload()
    expires = retained.retention_expiration_time
    expected = retained.time_created + datetime.timedelta(seconds=3600)
    expect(expires == expected, f"retentionExpirationTime {expires}, not {expected}")
    try:
        retained.delete()
    except exceptions.Forbidden:
        pass
    else:
        raise AssertionError("a retained object was deleted")


def computed_fields(ctx):
    """What the service computes or defaults: a new bucket in US (multi-region)
    with rpo DEFAULT, a given location upper-cased with its location type, a
    custom dual-region; autoclass's terminal class (NEARLINE) and times, soft
    delete's effective time; publicAccessPrevention only inherited or enforced; an
    upload's customTime kept; no content type for a compose that gives none."""
    made = []
    plain = ctx.client.create_bucket(fresh_bucket(ctx, "plain"))
    made.append(plain)
    got = (plain.location, plain.location_type, plain.rpo)
    expect(got == ("US", "multi-region", "DEFAULT"), f"a bucket without a location: {got}")
    region = ctx.client.create_bucket(fresh_bucket(ctx, "region"), location="us-east1")
    made.append(region)
    got = (region.location, region.location_type)
    expect(got == ("US-EAST1", "region"), f"a bucket in us-east1: {got}")
    dual = ctx.client.create_bucket(
        fresh_bucket(ctx, "dual"), location="US", data_locations=["US-EAST1", "US-WEST1"]
    )
    made.append(dual)
    expect(dual.location_type == "dual-region", f"a custom placement: {dual.location_type}")
    auto = ctx.client.bucket(fresh_bucket(ctx, "auto"))
    auto.autoclass_enabled = True
    auto.soft_delete_policy.retention_duration_seconds = 604800
    auto.create()
    made.append(auto)
    got = (auto.autoclass_terminal_storage_class, auto.soft_delete_policy.effective_time)
    expect(got[0] == "NEARLINE" and got[1] is not None, f"autoclass and soft delete: {got}")
    stamps = (auto.autoclass_toggle_time, auto.autoclass_terminal_storage_class_update_time)
    expect(None not in stamps, f"autoclass times {stamps}")
    plain.iam_configuration.public_access_prevention = "sometimes"
    try:
        plain.patch()
    except exceptions.BadRequest:
        pass
    else:
        raise AssertionError("publicAccessPrevention 'sometimes' was taken")

    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    timed = ctx.bucket.blob(ctx.name("fields/timed"))
    timed.custom_time = when
    timed.upload_from_string(b"timed")
    timed.reload()
    expect(timed.custom_time == when, f"customTime {timed.custom_time}")
    composite = ctx.bucket.blob(ctx.name("fields/composed"))
    composite.compose([timed])
    composite.reload()
    expect(composite.content_type is None, f"contentType {composite.content_type}")
    for bucket in made:
        bucket.delete()


KMS_KEY = "projects/p/locations/us/keyRings/r/cryptoKeys/k"


def kms_key(ctx):
    """An object uploaded with a Cloud KMS key (kms_key_name, sent as the
    kmsKeyName parameter) answers the key's version in kms_key_name, as the
    service does; so does one written to a bucket whose default key is set."""
    version = f"{KMS_KEY}/cryptoKeyVersions/1"
    keyed = ctx.bucket.blob(ctx.name("kms/keyed"), kms_key_name=KMS_KEY)
    keyed.upload_from_string(b"keyed")
    keyed.reload()
    expect(keyed.kms_key_name == version, f"kmsKeyName {keyed.kms_key_name}")
    bucket = ctx.client.bucket(fresh_bucket(ctx, "kms"))
    bucket.default_kms_key_name = KMS_KEY
    bucket.create()
    plain = bucket.blob("p")
    plain.upload_from_string(b"plain")
    plain.reload()
    expect(plain.kms_key_name == version, f"the default's kmsKeyName {plain.kms_key_name}")
    plain.delete()
    bucket.delete()


def object_retention(ctx):
    """Object retention: a bucket created with enable_object_retention shows
    object_retention_mode Enabled; an object's Unlocked retention is kept and
    answered, refuses a delete (403) before its time, and is removed only with
    override_unlocked_retention."""
    bucket = ctx.client.create_bucket(
        fresh_bucket(ctx, "objret"), enable_object_retention=True
    )
    expect(bucket.object_retention_mode == "Enabled", f"mode {bucket.object_retention_mode}")
    blob = bucket.blob("r")
    blob.upload_from_string(b"retained")
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    until = until.replace(microsecond=0)
    blob.retention.mode = "Unlocked"
    blob.retention.retain_until_time = until
    blob.patch()
    blob.reload()
    got = (blob.retention.mode, blob.retention.retain_until_time)
    expect(got == ("Unlocked", until), f"retention {got}")
    try:
        blob.delete()
    except exceptions.Forbidden:
        pass
    else:
        raise AssertionError("an object under retention was deleted")
    blob.retention.mode = None
    blob.retention.retain_until_time = None
    blob.patch(override_unlocked_retention=True)
    expect(blob.retention.mode is None, f"retention left {blob.retention.mode}")
    blob.delete()
    bucket.delete()


def hmac_teardown(ctx):
    """An HMAC key set INACTIVE and deleted answers NotFound to a second
    update, as storage-testbench does: the teardown of the Python client's
    conformance tests (update, delete, pass on NotFound) then passes."""
    key, _secret = ctx.client.create_hmac_key(
        service_account_email="checks@fake-project.iam.gserviceaccount.com"
    )
    key.state = "INACTIVE"
    key.update()
    key.delete()
    try:
        key.update()
    except exceptions.NotFound:
        pass
    else:
        raise AssertionError("a deleted HMAC key was updated")


def versions(ctx):
    """Object versioning: in a bucket with versioning on, a replaced object stays
    as a noncurrent version, read by its generation (its bytes, a time_deleted);
    list_blobs(versions=True) lists every generation, in name then generation
    order, across pages; a copy from an old generation has its bytes; deleting
    one generation deletes that version alone; the bucket cannot be deleted while
    versions are left, and delete(force=True) (which lists with versions and
    deletes each) empties and deletes it."""
    bucket = ctx.client.bucket(fresh_bucket(ctx, "versions"))
    bucket.versioning_enabled = True
    bucket.create()
    blob = bucket.blob("v")
    written = []
    for data in (b"one", b"two", b"three"):
        blob.upload_from_string(data)
        written.append(blob.generation)
    bucket.blob("w").upload_from_string(b"other")
    old = bucket.get_blob("v", generation=written[0])
    expect(old is not None and old.generation == written[0], f"generation {written[0]}: {old}")
    expect(old.time_deleted is not None, "a noncurrent version has time_deleted")
    expect(old.download_as_bytes() == b"one", "the first version's bytes")
    again = bucket.blob("v", generation=written[1])
    again.reload()
    expect(again.download_as_bytes() == b"two", "reload(generation) then download")
    live = bucket.get_blob("v")
    expect(live.generation == written[2] and live.time_deleted is None, f"live {live.generation}")
    listed = [(b.name, b.generation) for b in bucket.list_blobs(versions=True, page_size=1)]
    wanted = [("v", g) for g in written] + [("w", listed[-1][1])]
    expect(listed == wanted, f"list_blobs(versions=True): {listed}")
    only_live = [b.name for b in bucket.list_blobs()]
    expect(only_live == ["v", "w"], f"list_blobs(): {only_live}")
    copied = bucket.copy_blob(old, bucket, "copied", source_generation=written[0])
    expect(copied.download_as_bytes() == b"one", "a copy of the first version")
    bucket.delete_blob("v", generation=written[1])
    left = [b.generation for b in bucket.list_blobs(versions=True, prefix="v")]
    expect(left == [written[0], written[2]], f"after deleting {written[1]}: {left}")
    for blob in bucket.list_blobs():
        blob.delete()
    try:
        bucket.delete()
    except exceptions.Conflict:
        pass
    else:
        raise AssertionError("a bucket with noncurrent versions was deleted")
    bucket.delete(force=True)
    expect(not ctx.client.lookup_bucket(bucket.name), "delete(force=True) deleted it")


def move(ctx):
    """move_blob renames an object in one request (moveTo): the new name has the
    bytes and content type, a new generation; the old name is gone; a source
    precondition that does not hold is PreconditionFailed and moves nothing."""
    source = ctx.bucket.blob(ctx.name("move/source"))
    source.upload_from_string(b"moving", content_type="text/plain")
    try:
        ctx.bucket.move_blob(source, ctx.name("move/x"), if_source_generation_match=source.generation + 1)
    except exceptions.PreconditionFailed:
        pass
    else:
        raise AssertionError("a move whose source precondition failed was done")
    moved = ctx.bucket.move_blob(source, ctx.name("move/target"), if_source_generation_match=source.generation)
    expect(moved.name == ctx.name("move/target"), f"moved to {moved.name}")
    expect(moved.generation != source.generation, "the destination is a new generation")
    expect(moved.download_as_bytes() == b"moving", "the moved bytes")
    expect(moved.content_type == "text/plain", f"contentType {moved.content_type}")
    expect(not source.exists(), "the source is gone")


CHECKS = {
    "simple_upload": simple_upload,
    "multipart_upload": multipart_upload,
    "resumable_upload": resumable_upload,
    "download_validated": download_validated,
    "attributes": attributes,
    "list": list_objects,
    "list_filters": list_filters,
    "delete": delete,
    "precondition": precondition,
    "compose": compose,
    "holds": holds,
    "computed_fields": computed_fields,
    "kms_key": kms_key,
    "object_retention": object_retention,
    "hmac_teardown": hmac_teardown,
    "versions": versions,
    "move": move,
}

# The checks `--suite uploads` runs, without their read-backs.
UPLOAD_CHECKS = ["simple_upload", "multipart_upload", "resumable_upload", "attributes"]


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    env = os.environ
    parser.add_argument("--endpoint", default=env.get("GCS_ENDPOINT") or env.get("STORAGE_EMULATOR_HOST"))
    parser.add_argument("--bucket", default=env.get("GCS_BUCKET"))
    parser.add_argument("--only", default=env.get("GCS_CHECKS", ""))
    parser.add_argument("--suite", choices=["all", "uploads"], default=env.get("GCS_SUITE", "all"))
    parser.add_argument("--manifest", default=env.get("GCS_MANIFEST"))
    parser.add_argument("--prefix", default=f"python-{int(time.time() * 1000)}-{os.getpid()}/")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list:
        return args
    if not args.endpoint or not args.bucket:
        parser.error("give --endpoint URL and --bucket NAME (or GCS_ENDPOINT and GCS_BUCKET)")
    args.only = [c for c in args.only.split(",") if c]
    unknown = [c for c in args.only if c not in CHECKS]
    if unknown:
        parser.error(f"unknown checks {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    not_uploads = [c for c in args.only if c not in UPLOAD_CHECKS]
    if args.suite == "uploads" and not_uploads:
        parser.error(f"--suite uploads runs only {', '.join(UPLOAD_CHECKS)}; not {', '.join(not_uploads)}")
    return args


def main():
    args = arguments()
    if args.list:
        print("\n".join(CHECKS))
        return 0
    writes_only = args.suite == "uploads"
    ctx = Context(args.endpoint, args.bucket, args.prefix, writes_only, args.manifest)
    selected = args.only or (UPLOAD_CHECKS if writes_only else list(CHECKS))
    failed = 0
    for check in selected:
        try:
            CHECKS[check](ctx)
            print(f"ok   {check}", flush=True)
        except Exception as e:  # every failure is reported, then the next check runs
            failed += 1
            print(f"FAIL {check}: {type(e).__name__}: {e}", flush=True)
    print(
        f"python google-cloud-storage {version('google-cloud-storage')} against "
        f"{args.endpoint} bucket {args.bucket}: "
        f"{len(selected) - failed} of {len(selected)} checks passed"
    )
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
