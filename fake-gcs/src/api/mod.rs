//! The JSON and XML APIs applied to the fake's state: one request, under the lock,
//! with its whole body in hand. Parsing and answering are the wire layer's
//! ([`crate::wire`]); what is here is the bucket side: does the bucket exist, do the
//! preconditions hold against the live generation, what is stored, composed,
//! listed, read or deleted.
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the requests that move object bytes ([`Route`]): uploads, resumable sessions (and the testbench instructions that count their bytes), reads, lists, deletes, compose |
//! | `buckets.rs` | bucket insert, get, list, patch, update, delete, retention lock, IAM, notifications |
//! | `acl.rs` | bucket, default object and object access control lists |
//! | `objects.rs` | object patch, update, copy, rewrite and move |
//! | `managed_folders.rs` | managed folders: insert, get, list, delete, IAM |
//! | `projects.rs` | HMAC keys and the service account |

mod acl;
mod buckets;
mod managed_folders;
mod objects;
mod projects;
mod xml_multipart;

use std::num::NonZeroU32;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use serde_json::{Map, Value};

use crate::bucket::Bucket;
use crate::fake::{FakeGcs, NewObject, State};
use crate::faults::Fault;
use crate::metadata::managed_folder::folder_name;
use crate::retry_test::Instruction;
use crate::target::Target;
use crate::wire::{
    self, Api, ChunkRange, Compose, Conditions, Declared, Digests, ListQuery, MAX_COMPONENTS,
    MetaRoute, ObjectMeta, ObjectRecord, Operation, Preconditions, Progress, Query, Rejection,
    Reply, RequestHead, Route, Session, Upload, UploadKind, error_reply, etag_matches, header,
    parse_content_range, resolve_range,
};

/// What serving a request did: the reply and, for the request log, whether it wrote
/// an object and the bucket and object it turned out to name (a multipart upload
/// names its object in the body, a resumable session's requests name neither); and
/// a testbench instruction the API took, with what it does to the answer.
#[derive(Debug)]
pub(crate) struct Served {
    pub(crate) reply: Reply,
    pub(crate) committed: bool,
    pub(crate) bucket: Option<String>,
    pub(crate) object: Option<String>,
    /// The instruction taken while serving (a resumable session's `-after-`).
    pub(crate) fault: Option<Fault>,
    /// What it does to the answer.
    pub(crate) then: Option<Then>,
}

/// How an instruction taken while serving changes the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Then {
    /// Drop the connection without answering.
    Drop,
    /// Send this many bytes of the answer's body, then drop the connection.
    Cut(u64),
    /// Wait this long, then answer.
    Delay(Duration),
}

impl From<Reply> for Served {
    fn from(reply: Reply) -> Self {
        Served {
            reply,
            committed: false,
            bucket: None,
            object: None,
            fault: None,
            then: None,
        }
    }
}

const NO_SESSION: &str = "No such upload session.";

/// The message of a status a testbench instruction answers part-way through a
/// resumable upload.
const FAULT_DURING_UPLOAD: &str = "Fault injected during a resumable upload (retry test \
    instruction): the session keeps the bytes up to the instruction's size; ask it where \
    it stands and resume.";

/// Where a session request's bytes start, from its `Content-Range` (at the bytes
/// received so far when it has none); `None` when it brings no bytes.
fn chunk_start(content_range: Option<&str>, received: u64) -> Option<u64> {
    let Some(value) = content_range else {
        return Some(received);
    };
    match parse_content_range(value)?.range {
        ChunkRange::Bytes(first, _) | ChunkRange::From(first) => Some(first),
        ChunkRange::Empty | ChunkRange::EmptyAt(_) => None,
    }
}

/// Why a download or compose cannot have an object's bytes.
const NO_BYTES: &str = "This fake keeps only digests of objects written by requests \
    (keep_bytes is off), so it cannot serve their contents: set \
    FakeGcsConfig::keep_bytes, or run fake-gcs without --drop-bytes (it keeps bytes by \
    default, as with --keep-bytes).";

impl FakeGcs {
    /// Serves `target` with `data` against the state, under the lock.
    pub(crate) fn serve(
        &self,
        target: &Target,
        headers: &HeaderMap,
        query: &Query,
        data: Bytes,
    ) -> Served {
        if let Target::Fake(control) = target {
            return self.control(*control, headers, &data).into();
        }
        let now_ms = self.inner.clock.now_unix_ms();
        let base = format!("http://{}", header(headers, "host").unwrap_or("localhost"));
        let mut state = self.state();
        let mut ctx = Ctx {
            fake: self,
            state: &mut state,
            headers,
            query,
            base,
            now_ms,
        };
        match target {
            Target::Fake(_) => unreachable!("the fake's control API is served without the lock"),
            Target::Control(control) => ctx.state.retry_tests.answer(control, &data).into(),
            Target::Meta(meta) => ctx
                .meta(meta, &data)
                .unwrap_or_else(|rejection| rejection.reply(Api::Json).into()),
            Target::Api(route) => {
                let api = route.api();
                ctx.route(route, data)
                    .unwrap_or_else(|rejection| rejection.reply(api).into())
            }
        }
    }
}

/// One request against the state.
struct Ctx<'a> {
    fake: &'a FakeGcs,
    state: &'a mut State,
    headers: &'a HeaderMap,
    query: &'a Query,
    /// `http://host:port` as the client addressed us, for links we hand out.
    base: String,
    now_ms: u64,
}

impl Ctx<'_> {
    /// Serves `route`; a rejection is answered in the route's API.
    fn route(&mut self, route: &Route, data: Bytes) -> Result<Served, Rejection> {
        let request = RequestHead {
            query: self.query,
            headers: self.headers,
        };
        Ok(match route {
            Route::BucketsList => self.buckets_list().into(),
            Route::BucketGet { bucket } => self.bucket_get(bucket)?.into(),
            Route::ObjectList { api, bucket } => self.list(*api, bucket)?.into(),
            Route::ObjectGet {
                api,
                bucket,
                name,
                media,
                head,
            } => self.get(*api, bucket, name, *media, *head)?.into(),
            Route::ObjectDelete { bucket, name, .. } => self.delete(bucket, name)?.into(),
            Route::Upload { bucket, kind } => match kind {
                UploadKind::Media => self.store(Upload::media(bucket, request, data)?)?,
                UploadKind::Multipart => self.store(Upload::multipart(bucket, request, data)?)?,
                UploadKind::Resumable => self.start_resumable(bucket, request, &data)?,
            },
            Route::ResumableChunk { upload_id, .. } => self.resumable_chunk(upload_id, data)?,
            Route::ResumableCancel { upload_id, .. } => {
                match self.state.uploads.remove(upload_id) {
                    Some(_) => Reply::new(499).into(),
                    None => return Err(Rejection::status(404, NO_SESSION)),
                }
            }
            Route::XmlPut { bucket, name } => match header(self.headers, "x-goog-copy-source") {
                Some(source) => self.xml_copy(bucket, name, source)?,
                None => self.store(Upload::xml_put(bucket, name, request, data)?)?,
            },
            Route::XmlMultipart { bucket, name, step } => {
                self.xml_multipart(bucket, name, step, data)?
            }
            Route::Compose {
                bucket,
                destination,
            } => self.compose(Compose::parse(bucket, destination, request, &data)?)?,
            Route::Invalid {
                status, message, ..
            } => return Err(Rejection::status(*status, message.clone())),
        })
    }

    /// Whether the bucket exists, creating it first when the fake creates buckets on
    /// demand.
    fn bucket(&mut self, name: &str) -> bool {
        self.ensure_bucket(name);
        self.state.buckets.contains_key(name)
    }

    /// Creates the bucket when the fake creates buckets on first use, a request has
    /// not deleted it, and Cloud Storage would take its name (`POST
    /// /storage/v1/b` refuses the others; they stay 404 here).
    fn ensure_bucket(&mut self, name: &str) {
        if self.fake.inner.auto_create_buckets
            && !self.state.buckets.contains_key(name)
            && !self.state.deleted_buckets.contains(name)
            && buckets::check_bucket_name(name).is_ok()
        {
            self.state
                .buckets
                .insert(name.to_string(), Bucket::new(self.now_ms));
        }
    }

    /// The bucket, existing (or created on first use); 404 otherwise.
    fn existing(&mut self, name: &str) -> Result<&mut Bucket, Rejection> {
        self.ensure_bucket(name);
        self.state
            .buckets
            .get_mut(name)
            .ok_or_else(|| Rejection::NoSuchBucket(name.to_string()))
    }

    /// The body as a JSON object (an empty body is an empty object); 400 otherwise.
    fn json_body(data: &[u8]) -> Result<Map<String, Value>, Rejection> {
        if data.iter().all(u8::is_ascii_whitespace) {
            return Ok(Map::new());
        }
        match serde_json::from_slice(data) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(_) => Err(Rejection::invalid(
                "The request body must be a JSON object.",
            )),
            Err(e) => Err(Rejection::invalid(format!(
                "The request body is not JSON: {e}"
            ))),
        }
    }

    /// Whether the request asks for the full projection (ACLs shown).
    fn full_projection(&self) -> bool {
        self.query.get("projection") == Some("full")
    }

    /// Serves a metadata request with its body.
    fn meta(&mut self, route: &MetaRoute, data: &[u8]) -> Result<Served, Rejection> {
        match route {
            MetaRoute::BucketInsert => self.bucket_insert(data).map(Into::into),
            MetaRoute::Bucket { bucket, verb } => self.bucket_change(bucket, *verb, data),
            MetaRoute::LockRetentionPolicy { bucket } => self.lock_retention(bucket),
            MetaRoute::Iam { bucket, set } => self.iam(bucket, *set, data).map(Into::into),
            MetaRoute::TestIamPermissions { bucket } => self.test_permissions(bucket),
            MetaRoute::Notifications { bucket, id, verb } => {
                self.notifications(bucket, id.as_deref(), *verb, data)
            }
            MetaRoute::ManagedFolders {
                bucket,
                folder,
                verb,
            } => self.managed_folders(bucket, folder.as_deref(), *verb, data),
            MetaRoute::ManagedFolderIam {
                bucket,
                folder,
                set,
            } => self.folder_iam(bucket, &folder_name(folder)?, *set, data),
            MetaRoute::Acl { .. } => self.acl(route, data),
            MetaRoute::Object { bucket, name, verb } => {
                self.object_change(bucket, name, *verb, data)
            }
            MetaRoute::Copy { .. } => self.copy(route, data),
            MetaRoute::Move {
                bucket,
                source,
                name,
            } => self.move_object(bucket, source, name),
            MetaRoute::HmacKeys {
                project,
                access_id,
                verb,
            } => self.hmac_keys(project, access_id.as_deref(), *verb, data),
            MetaRoute::ServiceAccount { .. } => {
                Ok(Reply::json(200, &crate::metadata::service_account()).into())
            }
        }
    }

    fn list(&mut self, api: Api, bucket: &str) -> Result<Reply, Rejection> {
        let max_limit = self.fake.inner.limits.max_list_results.max(1);
        let query = ListQuery::parse(api, self.query, max_limit)?;
        if !self.bucket(bucket) {
            return Err(Rejection::NoSuchBucket(bucket.to_string()));
        }
        let b = &self.state.buckets[bucket];
        // A page token resumes after a name (and generation); an inclusive start
        // resumes before every generation of its name.
        let after = match (&query.after, &query.from) {
            (Some(after), _) => Some((after.as_str(), query.after_generation)),
            (None, Some(from)) => Some((from.as_str(), i64::MIN)),
            (None, None) => None,
        };
        let page = b.list(&query, after);
        Ok(page.reply(api, &self.base, bucket, &query))
    }

    fn get(
        &mut self,
        api: Api,
        bucket: &str,
        name: &str,
        media: bool,
        head: bool,
    ) -> Result<Reply, Rejection> {
        let (record, bytes, meta) = self.find(bucket, name)?;
        if !media {
            let resource = self.object_resource(bucket, &record, meta.as_ref());
            return Ok(Reply::json(200, &resource));
        }
        let etag = record.etag(api);
        if api == Api::Xml
            && let Some(reply) = self.etag_conditions(&etag)?
        {
            return Ok(reply);
        }
        let mut reply = self.download(api, &record, bytes.as_ref(), etag, head)?;
        if let Some(meta) = meta {
            // A metadata call changed the object: its headers say which metageneration.
            let shown = reply
                .headers
                .iter_mut()
                .find(|(n, _)| n == "x-goog-metageneration");
            if let Some((_, value)) = shown {
                *value = meta.metageneration.to_string();
            }
        }
        Ok(reply)
    }

    /// The object `bucket/name` (its live version, or the version `generation`
    /// asks for, live or noncurrent), its bytes (when kept) and what its resource
    /// shows beyond its record, if the preconditions hold.
    fn find(
        &mut self,
        bucket: &str,
        name: &str,
    ) -> Result<(ObjectRecord, Option<Bytes>, Option<ObjectMeta>), Rejection> {
        let pre = Preconditions::parse(self.query, self.headers)?;
        let conditions = Conditions::parse(self.query, "if")?;
        let generation = self.generation_param("generation")?;
        if !self.bucket(bucket) {
            return Err(Rejection::NoSuchBucket(bucket.to_string()));
        }
        let version = self.state.buckets[bucket]
            .version(name, generation)
            .ok_or_else(|| Rejection::NoSuchObject {
                bucket: bucket.to_string(),
                name: name.to_string(),
            })?;
        let object = version.object;
        if !pre.hold(Some(object.generation)) || !conditions.hold(Some(object.live())) {
            return Err(Rejection::PreconditionFailed);
        }
        Ok((object.record(name), object.bytes.clone(), version.meta()))
    }

    /// `If-Match` (412 unless it matches) and `If-None-Match` (304 when it matches)
    /// against the XML ETag.
    fn etag_conditions(&self, etag: &str) -> Result<Option<Reply>, Rejection> {
        if let Some(if_match) = header(self.headers, "if-match")
            && !etag_matches(if_match, etag)
        {
            return Err(Rejection::PreconditionFailed);
        }
        if let Some(if_none_match) = header(self.headers, "if-none-match")
            && etag_matches(if_none_match, etag)
        {
            let mut reply = Reply::new(304).header("etag", etag);
            reply.head_len = Some(0);
            return Ok(Some(reply));
        }
        Ok(None)
    }

    /// The bytes of `r` (all, or the `Range` asked for), or for `HEAD` its headers
    /// alone. 501 when the fake keeps no bytes.
    fn download(
        &self,
        api: Api,
        r: &ObjectRecord,
        bytes: Option<&Bytes>,
        etag: String,
        head: bool,
    ) -> Result<Reply, Rejection> {
        let range = match header(self.headers, "range") {
            None => None,
            Some(value) => match resolve_range(value, r.size) {
                Some(range) => Some(range),
                None => {
                    return Ok(error_reply(
                        api,
                        416,
                        Some("The requested range cannot be satisfied."),
                    )
                    .header("content-range", format!("bytes */{}", r.size)));
                }
            },
        };
        let mut reply = Reply::new(if range.is_some() { 206 } else { 200 })
            .attribute_headers(r)
            .object_headers(r, etag)
            .header("x-goog-storage-class", "STANDARD")
            .header("accept-ranges", "bytes");
        let (start, end) = range.unwrap_or((0, r.size.saturating_sub(1)));
        if let Some((start, end)) = range {
            reply = reply.header("content-range", format!("bytes {start}-{end}/{}", r.size));
        }
        let len = if r.size == 0 { 0 } else { end - start + 1 };
        if head {
            reply.head_len = Some(len);
            return Ok(reply);
        }
        match bytes {
            Some(bytes) if len > 0 => Ok(reply.body(bytes.slice(start as usize..=end as usize))),
            Some(_) => Ok(reply),
            None => Err(Rejection::status(501, NO_BYTES)),
        }
    }

    /// Deletes the live version of `bucket/name` (noncurrent from then on under
    /// versioning), or for good the version `generation` names, live or
    /// noncurrent, if the preconditions hold against it and no hold or retention
    /// protects it.
    fn delete(&mut self, bucket: &str, name: &str) -> Result<Reply, Rejection> {
        let pre = Preconditions::parse(self.query, self.headers)?;
        let conditions = Conditions::parse(self.query, "if")?;
        let generation = self.generation_param("generation")?;
        self.ensure_bucket(bucket);
        let now_ms = self.now_ms;
        let state = &mut *self.state;
        let Some(b) = state.buckets.get_mut(bucket) else {
            return Err(Rejection::NoSuchBucket(bucket.to_string()));
        };
        let Some(version) = b.version(name, generation) else {
            return Err(Rejection::NoSuchObject {
                bucket: bucket.to_string(),
                name: name.to_string(),
            });
        };
        let object = version.object;
        if !pre.hold(Some(object.generation)) || !conditions.hold(Some(object.live())) {
            state.stats.precondition_failures += 1;
            return Err(Rejection::PreconditionFailed);
        }
        b.protect_version(bucket, name, object, now_ms)?;
        match generation {
            Some(generation) => _ = b.delete_version(name, generation),
            None => b.delete_live(name, now_ms),
        }
        Ok(Reply::new(204))
    }

    /// Stores `upload` if the bucket exists, the declared digests match and the
    /// preconditions hold.
    fn store(&mut self, upload: Upload) -> Result<Served, Rejection> {
        self.ensure_bucket(&upload.bucket);
        let keep_bytes = self.fake.inner.keep_bytes;
        let now_ms = self.now_ms;
        let state = &mut *self.state;
        let Some(b) = state.buckets.get(&upload.bucket) else {
            return Err(Rejection::NoSuchBucket(upload.bucket));
        };
        let digests = upload.digests()?;
        b.check_new_retention(&upload.fields)?;
        let current = b.objects.get(&upload.name).map(|o| o.generation);
        if !upload.preconditions.hold(current) {
            state.stats.precondition_failures += 1;
            // The log names the object a refused write was for.
            return Ok(Served {
                object: Some(upload.name),
                ..Rejection::PreconditionFailed.reply(upload.api).into()
            });
        }
        if let Err(held) = b.protect(&upload.bucket, &upload.name, now_ms) {
            return Ok(Served {
                object: Some(upload.name),
                ..held.reply(upload.api).into()
            });
        }
        let object = NewObject {
            name: upload.name,
            data: upload.data,
            digests,
            content_type: upload.content_type,
            attributes: upload.attributes,
            component_count: None,
            fields: upload.fields,
        };
        let record = state.commit(&upload.bucket, object, now_ms, keep_bytes);
        state.stats.objects_committed += 1;
        let reply = match upload.api {
            Api::Json => Reply::json(200, &self.written_resource(&upload.bucket, &record)),
            Api::Xml => wire::uploaded(upload.api, &self.base, &upload.bucket, &record),
        };
        Ok(Served {
            reply,
            committed: true,
            object: Some(record.name),
            ..Served::from(Reply::new(200))
        })
    }

    /// Stores the concatenation of `compose`'s sources as a composite object, if
    /// the bucket and every source exist (in the generation asked for, with their
    /// preconditions holding), their bytes are kept, and the destination's
    /// preconditions hold. The result keeps its bytes (it could be made only
    /// because its sources' were there).
    fn compose(&mut self, compose: Compose) -> Result<Served, Rejection> {
        self.ensure_bucket(&compose.bucket);
        let (data, components) = self.concatenate(&compose)?;
        let now_ms = self.now_ms;
        let state = &mut *self.state;
        let b = &state.buckets[&compose.bucket];
        let current = b.objects.get(&compose.destination);
        let conditions = Conditions::parse(self.query, "if")?;
        if !compose.preconditions.hold(current.map(|o| o.generation))
            || !conditions.hold(current.map(|o| o.live()))
        {
            state.stats.precondition_failures += 1;
            return Err(Rejection::PreconditionFailed);
        }
        b.protect(&compose.bucket, &compose.destination, now_ms)?;
        let object = NewObject {
            name: compose.destination,
            digests: Digests::of(&data),
            data,
            content_type: compose.content_type,
            attributes: compose.attributes,
            component_count: Some(components),
            fields: serde_json::Map::new(),
        };
        let record = state.commit(&compose.bucket, object, now_ms, true);
        state.stats.objects_committed += 1;
        Ok(Served {
            reply: Reply::json(200, &self.written_resource(&compose.bucket, &record)),
            committed: true,
            object: Some(record.name),
            ..Served::from(Reply::new(200))
        })
    }

    /// The sources' bytes, concatenated, and how many non-composite components
    /// they add up to.
    fn concatenate(&mut self, compose: &Compose) -> Result<(Bytes, NonZeroU32), Rejection> {
        let max_bytes = self.fake.inner.limits.max_request_bytes;
        let state = &mut *self.state;
        let Some(b) = state.buckets.get(&compose.bucket) else {
            return Err(Rejection::NoSuchBucket(compose.bucket.clone()));
        };
        let mut data = BytesMut::new();
        let mut components = 0u32;
        for source in &compose.sources {
            let object = b
                .version(&source.name, source.generation)
                .ok_or_else(|| Rejection::NoSuchObject {
                    bucket: compose.bucket.clone(),
                    name: source.name.clone(),
                })?
                .object;
            if source
                .if_generation_match
                .is_some_and(|g| g != object.generation)
            {
                state.stats.precondition_failures += 1;
                return Err(Rejection::PreconditionFailed);
            }
            let bytes = object
                .bytes
                .as_ref()
                .ok_or(Rejection::status(501, NO_BYTES))?;
            if (data.len() + bytes.len()) as u64 > max_bytes {
                let message = format!(
                    "the composite object would exceed the fake's limit of {max_bytes} bytes"
                );
                return Err(Rejection::status(413, message));
            }
            data.extend_from_slice(bytes);
            components += object.component_count.map_or(1, NonZeroU32::get);
        }
        if components > MAX_COMPONENTS {
            return Err(Rejection::invalid(format!(
                "The composite object would have {components} components; at most {MAX_COMPONENTS}."
            )));
        }
        let components = NonZeroU32::new(components).expect("at least one source");
        Ok((data.freeze(), components))
    }

    /// Opens a resumable session, if the bucket exists and the preconditions hold
    /// now (they are checked again when the upload completes).
    fn start_resumable(
        &mut self,
        bucket: &str,
        head: RequestHead<'_>,
        body: &[u8],
    ) -> Result<Served, Rejection> {
        let upload = Upload::resumable(bucket, head, body)?;
        if !self.bucket(bucket) {
            return Err(Rejection::NoSuchBucket(bucket.to_string()));
        }
        let b = &self.state.buckets[bucket];
        b.check_new_retention(&upload.fields)?;
        if !upload
            .preconditions
            .hold(b.objects.get(&upload.name).map(|o| o.generation))
        {
            self.state.stats.precondition_failures += 1;
            return Err(Rejection::PreconditionFailed);
        }
        let name = upload.name.clone();
        let id = self.state.uploads.open(Session::new(upload));
        Ok(Served {
            object: Some(name.clone()),
            ..wire::started(&self.base, bucket, &name, &id).into()
        })
    }

    /// One request of a resumable session: a chunk, the last one (which stores the
    /// object), or a status query. A completed session answers with its object
    /// again. A testbench instruction that counts the session's bytes acts here
    /// (see [`Instruction`]).
    fn resumable_chunk(&mut self, upload_id: &str, data: Bytes) -> Result<Served, Rejection> {
        let Some(session) = self.state.uploads.get_mut(upload_id) else {
            return Err(Rejection::status(404, NO_SESSION));
        };
        let (bucket, name) = (session.upload.bucket.clone(), session.upload.name.clone());
        let served = match self.counted_instruction() {
            Some(Instruction::BrokenStreamFinalChunkAfter { after_bytes }) => {
                let served = self.chunk(upload_id, &data);
                match served.reply.status {
                    200 => self.taken(served, Some(Then::Cut(after_bytes))),
                    _ => served,
                }
            }
            Some(instruction) => self.counted_chunk(upload_id, instruction, &data),
            None => self.chunk(upload_id, &data),
        };
        // The request log names the session's object: the path names none.
        Ok(Served {
            bucket: Some(bucket),
            object: Some(name),
            ..served
        })
    }

    /// One request of session `upload_id`, taken as it comes.
    fn chunk(&mut self, upload_id: &str, data: &[u8]) -> Served {
        let max_bytes = self.fake.inner.limits.max_request_bytes;
        let content_range = header(self.headers, "content-range");
        let declared_now = Declared::from_headers(self.headers);
        let Some(session) = self.state.uploads.get_mut(upload_id) else {
            return Rejection::status(404, NO_SESSION).reply(Api::Json).into();
        };
        if let Some(record) = &session.finalized {
            let (bucket, record) = (session.upload.bucket.clone(), record.clone());
            return Reply::json(200, &self.written_resource(&bucket, &record)).into();
        }
        match session.accept(content_range, data, max_bytes) {
            Err(rejection) => rejection.reply(Api::Json).into(),
            Ok(Progress::Incomplete) => {
                let reply = wire::incomplete(upload_id, session.received());
                wire::answer_308_as_asked(reply, self.headers).into()
            }
            Ok(Progress::Complete) => self.finalize(upload_id, declared_now),
        }
    }

    /// The next testbench instruction of this request's test (or the scripted
    /// queue) for uploads, when it is one that counts a session's bytes; left
    /// queued.
    fn counted_instruction(&mut self) -> Option<Instruction> {
        let test_id = header(self.headers, "x-retry-test-id");
        self.state
            .retry_tests
            .peek(test_id, Operation::ObjectsInsert)
            .filter(Instruction::counts_session_bytes)
    }

    /// A session request under an `-after-MK` instruction: when the session
    /// reaches M KiB with this request (or had already), the session keeps the
    /// bytes up to M KiB and the instruction acts (answers its status, breaks the
    /// stream, or stalls then carries on); otherwise the request is taken as it
    /// comes and the instruction waits.
    fn counted_chunk(&mut self, upload_id: &str, instruction: Instruction, data: &[u8]) -> Served {
        let threshold = match instruction {
            Instruction::ReturnAfter { after_bytes, .. }
            | Instruction::BrokenStreamAfter { after_bytes }
            | Instruction::StallAfter { after_bytes, .. } => after_bytes,
            _ => return self.chunk(upload_id, data),
        };
        let content_range = header(self.headers, "content-range");
        let Some(session) = self.state.uploads.get_mut(upload_id) else {
            return self.chunk(upload_id, data);
        };
        let received = session.received();
        let first = chunk_start(content_range, received);
        let reaches = |f: u64| f <= received && f + data.len() as u64 >= threshold;
        if session.finalized.is_some() || (received < threshold && !first.is_some_and(reaches)) {
            return self.chunk(upload_id, data);
        }
        if let Instruction::StallAfter { hold, .. } = instruction {
            let served = self.chunk(upload_id, data);
            return self.taken(served, Some(Then::Delay(hold)));
        }
        if let Some(first) = first.filter(|_| received < threshold) {
            // The bytes up to the threshold land; the rest of the request does not.
            let kept = (threshold - first) as usize;
            let range = format!("bytes {first}-{}/*", threshold - 1);
            let max_bytes = self.fake.inner.limits.max_request_bytes;
            let _ = session.accept(Some(&range), &data[..kept], max_bytes);
        }
        match instruction {
            Instruction::ReturnAfter { status, .. } => {
                let reply = error_reply(Api::Json, status, Some(FAULT_DURING_UPLOAD));
                self.taken(reply.into(), None)
            }
            _ => self.taken(Reply::new(200).into(), Some(Then::Drop)),
        }
    }

    /// Takes the instruction [`counted_instruction`](Self::counted_instruction)
    /// saw off its queue and counts it; `served` then carries it and what it does.
    fn taken(&mut self, served: Served, then: Option<Then>) -> Served {
        let test_id = header(self.headers, "x-retry-test-id");
        let state = &mut *self.state;
        let Some(instruction) = state.retry_tests.pop(test_id, Operation::ObjectsInsert) else {
            return served;
        };
        let fault = Fault::Scripted(instruction);
        *state.stats.by_fault.entry(fault.label()).or_default() += 1;
        Served {
            fault: Some(fault),
            then,
            ..served
        }
    }

    /// Stores a session's completed upload; the session then remembers the object,
    /// or is forgotten when the upload was refused.
    fn finalize(&mut self, upload_id: &str, declared_now: Declared) -> Served {
        let Some(session) = self.state.uploads.get_mut(upload_id) else {
            return Rejection::status(404, NO_SESSION).reply(Api::Json).into();
        };
        let upload = session.complete(declared_now);
        let (bucket, name) = (upload.bucket.clone(), upload.name.clone());
        let served = self
            .store(upload)
            .unwrap_or_else(|rejection| rejection.reply(Api::Json).into());
        if served.committed {
            let record = self
                .state
                .buckets
                .get(&bucket)
                .and_then(|b| b.objects.get(&name))
                .map(|o| o.record(&name));
            if let Some(session) = self.state.uploads.get_mut(upload_id) {
                session.finalized = record;
            }
        } else {
            self.state.uploads.remove(upload_id);
        }
        served
    }
}
