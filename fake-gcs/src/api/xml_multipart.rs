//! The XML API's multipart uploads and copies, as Cloud Storage serves them and
//! `object_store`'s `put_multipart` and `copy_if_not_exists` use them:
//!
//! | request | answer |
//! |---|---|
//! | `POST /{bucket}/{name}?uploads` | `InitiateMultipartUploadResult` with an `UploadId`; the content type and attributes come from its headers; a precondition is 400 `NotImplemented` (Cloud Storage cannot honour one on a multipart upload) |
//! | `PUT ?partNumber=N&uploadId=U` | 200 with the part's `ETag` (its MD5); a part sent again replaces the first |
//! | `POST ?uploadId=U` with `CompleteMultipartUpload` | the object, the listed parts concatenated in their order, as a new generation (a composite: no MD5, an ETag that is not one); `CompleteMultipartUploadResult` and `x-goog-generation` |
//! | `DELETE ?uploadId=U` | 204, the parts dropped |
//! | `GET ?uploadId=U` | `ListPartsResult` |
//! | `PUT /{bucket}/{name}` with `x-goog-copy-source: {bucket}/{source}` | a copy of the source's bytes, content type and attributes, under the destination's preconditions (`x-goog-if-generation-match: 0`: only if absent, else 412); `x-goog-copy-source-generation` copies that version, live or noncurrent |

use std::num::NonZeroU32;

use bytes::{Bytes, BytesMut};

use super::{Ctx, Served};
use crate::fake::{Described, XmlPart, XmlUpload};
use crate::wire::{
    self, Digests, MultipartStep, ObjectAttributes, ObjectRecord, Preconditions, Rejection, Reply,
    header, md5_hex,
};

/// Cloud Storage's answer to an upload ID it does not know.
const NO_UPLOAD: &str = "The requested upload was not found.";

impl Ctx<'_> {
    /// One step of an XML multipart upload of `bucket/name`.
    pub(super) fn xml_multipart(
        &mut self,
        bucket: &str,
        name: &str,
        step: &MultipartStep,
        data: Bytes,
    ) -> Result<Served, Rejection> {
        self.existing(bucket)?;
        match step {
            MultipartStep::Start => self.multipart_start(bucket, name),
            MultipartStep::Part {
                upload_id,
                part_number,
            } => self.multipart_part(upload_id, *part_number, data),
            MultipartStep::Complete { upload_id } => self.multipart_complete(upload_id, &data),
            MultipartStep::Abort { upload_id } => match self.state.xml_uploads.remove(upload_id) {
                Some(_) => Ok(Reply::new(204).into()),
                None => Err(no_upload()),
            },
            MultipartStep::ListParts { upload_id } => self.multipart_list(upload_id),
        }
    }

    fn multipart_start(&mut self, bucket: &str, name: &str) -> Result<Served, Rejection> {
        let preconditions = Preconditions::parse(self.query, self.headers)?;
        if preconditions != Preconditions::default() {
            return Err(Rejection::status(
                400,
                "NotImplemented: A request precondition is not supported for multipart uploads.",
            ));
        }
        let attributes =
            ObjectAttributes::from_headers(self.headers).map_err(Rejection::invalid)?;
        let content_type = wire::content_type(header(self.headers, "content-type"));
        self.state.xml_upload_ids += 1;
        let upload_id = format!("xml-upload-{}", self.state.xml_upload_ids);
        let upload = XmlUpload {
            bucket: bucket.to_string(),
            name: name.to_string(),
            content_type,
            attributes,
            parts: Default::default(),
        };
        self.state.xml_uploads.insert(upload_id.clone(), upload);
        let body = format!(
            "<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult \
             xmlns='http://s3.amazonaws.com/doc/2006-03-01/'><Bucket>{}</Bucket><Key>{}</Key>\
             <UploadId>{}</UploadId></InitiateMultipartUploadResult>",
            wire::xml_escape(bucket),
            wire::xml_escape(name),
            upload_id
        );
        Ok(Reply::xml(200, body).into())
    }

    fn multipart_part(
        &mut self,
        upload_id: &str,
        number: u32,
        data: Bytes,
    ) -> Result<Served, Rejection> {
        let keep_bytes = self.fake.inner.keep_bytes;
        let upload = self.state.xml_uploads.get_mut(upload_id);
        let upload = upload.ok_or_else(no_upload)?;
        let digests = Digests::of(&data);
        let etag = format!("\"{}\"", md5_hex(&digests.md5));
        let part = XmlPart {
            len: data.len() as u64,
            bytes: keep_bytes.then_some(data),
            digests,
        };
        upload.parts.insert(number, part);
        Ok(Reply::new(200).header("etag", etag).into())
    }

    fn multipart_complete(&mut self, upload_id: &str, body: &[u8]) -> Result<Served, Rejection> {
        let listed = listed_parts(body)?;
        let upload = self
            .state
            .xml_uploads
            .get(upload_id)
            .ok_or_else(no_upload)?;
        if let Some(b) = self.state.buckets.get(&upload.bucket) {
            // A held or retained object is not replaced; the upload stays.
            b.protect(&upload.bucket, &upload.name, self.now_ms)?;
        }
        let mut data = Some(BytesMut::new());
        let (mut size, mut crc32c, mut last) = (0u64, 0u32, 0u32);
        for (number, etag) in &listed {
            let part = upload.parts.get(number).filter(|_| *number > last);
            let part = part.ok_or_else(|| {
                Rejection::invalid(format!(
                    "InvalidPart: part {number} was not uploaded, or the parts are not in \
                     ascending order."
                ))
            })?;
            if etag.trim_matches('"') != md5_hex(&part.digests.md5) {
                return Err(Rejection::invalid(format!(
                    "InvalidPart: the ETag of part {number} is not that of its bytes."
                )));
            }
            crc32c = crc32c::crc32c_combine(crc32c, part.digests.crc32c, part.len as usize);
            size += part.len;
            data = data.zip(part.bytes.as_ref()).map(|(mut all, bytes)| {
                all.extend_from_slice(bytes);
                all
            });
            last = *number;
        }
        let components = NonZeroU32::new(listed.len() as u32)
            .ok_or_else(|| Rejection::invalid("MalformedXML: no part is listed."))?;
        let upload = self.state.xml_uploads.remove(upload_id).expect("found");
        let data = data.map(BytesMut::freeze);
        // A composite has no MD5 of its own (its resource shows none).
        let md5 = data.as_ref().map_or([0; 16], |d| Digests::of(d).md5);
        let object = Described {
            name: upload.name,
            size,
            digests: Digests { crc32c, md5 },
            content_type: upload.content_type,
            attributes: upload.attributes,
            component_count: Some(components),
            fields: serde_json::Map::new(),
        };
        let now_ms = self.now_ms;
        let record = self
            .state
            .commit_described(&upload.bucket, object, data, now_ms);
        self.state.stats.objects_committed += 1;
        let body = format!(
            "<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult \
             xmlns='http://s3.amazonaws.com/doc/2006-03-01/'><Location>{base}/{bucket}/{key}\
             </Location><Bucket>{bucket}</Bucket><Key>{key}</Key><ETag>{etag}</ETag>\
             </CompleteMultipartUploadResult>",
            base = self.base,
            bucket = wire::xml_escape(&upload.bucket),
            key = wire::xml_escape(&record.name),
            etag = wire::xml_escape(&record.xml_etag()),
        );
        Ok(committed(body, record))
    }

    fn multipart_list(&mut self, upload_id: &str) -> Result<Served, Rejection> {
        let upload = self
            .state
            .xml_uploads
            .get(upload_id)
            .ok_or_else(no_upload)?;
        let parts: String = (upload.parts.iter())
            .map(|(number, part)| {
                let etag = md5_hex(&part.digests.md5);
                format!(
                    "<Part><PartNumber>{number}</PartNumber><ETag>\"{etag}\"</ETag><Size>{}</Size></Part>",
                    part.len
                )
            })
            .collect();
        let body = format!(
            "<?xml version='1.0' encoding='UTF-8'?><ListPartsResult><Bucket>{}</Bucket>\
             <Key>{}</Key><UploadId>{upload_id}</UploadId>{parts}</ListPartsResult>",
            wire::xml_escape(&upload.bucket),
            wire::xml_escape(&upload.name),
        );
        Ok(Reply::xml(200, body).into())
    }

    /// XML `PUT /{bucket}/{name}` with `x-goog-copy-source`: a copy of the source
    /// (its bytes, content type and attributes) under the destination's
    /// preconditions.
    pub(super) fn xml_copy(
        &mut self,
        bucket: &str,
        name: &str,
        source: &str,
    ) -> Result<Served, Rejection> {
        let source = source.trim().trim_start_matches('/');
        let (source_bucket, source_name) = source
            .split_once('/')
            .and_then(|(b, n)| Some((wire::decode_path(b)?, wire::decode_path(n)?)))
            .ok_or_else(|| {
                Rejection::invalid(format!(
                    "x-goog-copy-source {source:?} is not BUCKET/OBJECT"
                ))
            })?;
        let preconditions = Preconditions::parse(self.query, self.headers)?;
        let generation = header(self.headers, "x-goog-copy-source-generation");
        let generation = generation
            .map(|g| {
                g.trim().parse::<i64>().map_err(|_| {
                    Rejection::invalid(format!(
                        "x-goog-copy-source-generation {g:?} is not a number"
                    ))
                })
            })
            .transpose()?;
        self.existing(bucket)?;
        self.existing(&source_bucket)?;
        let src = self.state.buckets[&source_bucket].version(&source_name, generation);
        let src = src
            .map(|v| v.object.clone())
            .ok_or(Rejection::NoSuchObject {
                bucket: source_bucket,
                name: source_name,
            })?;
        let current = self.state.buckets[bucket]
            .objects
            .get(name)
            .map(|o| o.generation);
        if !preconditions.hold(current) {
            self.state.stats.precondition_failures += 1;
            return Err(Rejection::PreconditionFailed);
        }
        self.state.buckets[bucket].protect(bucket, name, self.now_ms)?;
        let edit = self.copied_metadata(&src, &serde_json::Map::new(), None)?;
        let record = self.place_copy(bucket, name, &src, edit);
        let body = format!(
            "<?xml version='1.0' encoding='UTF-8'?><CopyObjectResult><LastModified>{}\
             </LastModified><ETag>{}</ETag></CopyObjectResult>",
            wire::rfc3339_millis(record.created_unix_ms),
            wire::xml_escape(&record.xml_etag()),
        );
        Ok(committed(body, record))
    }
}

/// The 200 of a request that wrote `record`: `body` and its generation.
fn committed(body: String, record: ObjectRecord) -> Served {
    let generation = record.generation.to_string();
    let reply = Reply::xml(200, body).header("x-goog-generation", generation);
    Served {
        committed: true,
        object: Some(record.name),
        ..reply.into()
    }
}

fn no_upload() -> Rejection {
    Rejection::status(404, format!("NoSuchUpload: {NO_UPLOAD}"))
}

/// The (part number, ETag) pairs a `CompleteMultipartUpload` body lists, in order.
fn listed_parts(body: &[u8]) -> Result<Vec<(u32, String)>, Rejection> {
    let text = std::str::from_utf8(body)
        .map_err(|_| Rejection::invalid("MalformedXML: the body is not UTF-8."))?;
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<Part>") {
        let after = &rest[start + "<Part>".len()..];
        let end = after
            .find("</Part>")
            .ok_or_else(|| Rejection::invalid("MalformedXML: a <Part> is not closed."))?;
        let part = &after[..end];
        let number = element(part, "PartNumber")
            .and_then(|n| n.trim().parse::<u32>().ok())
            .ok_or_else(|| Rejection::invalid("MalformedXML: a <Part> has no <PartNumber>."))?;
        let etag = element(part, "ETag")
            .ok_or_else(|| Rejection::invalid("MalformedXML: a <Part> has no <ETag>."))?;
        parts.push((number, etag.replace("&quot;", "\"")));
        rest = &after[end..];
    }
    Ok(parts)
}

/// The text of `<name>...</name>` in `xml`.
fn element<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&close)? + start;
    Some(&xml[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_body_lists_its_parts_in_order() {
        let body = br#"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"a"</ETag></Part><Part><PartNumber>2</PartNumber><ETag>&quot;b&quot;</ETag></Part></CompleteMultipartUpload>"#;
        assert_eq!(
            listed_parts(body).unwrap(),
            [(1, "\"a\"".to_string()), (2, "\"b\"".to_string())]
        );
        assert!(listed_parts(b"<Part><ETag>x</ETag></Part>").is_err());
        assert!(listed_parts(b"<Part><PartNumber>1</PartNumber>").is_err());
    }
}
