//! The `fake-gcs` process: the upstream store. Outages through its control API
//! (`POST /_fake/faults`, `DELETE /_fake/faults`), and its final contents through
//! Cloud Storage's JSON API listing (name, size, MD5, crc32c, attributes).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use ::http::Method;
use anyhow::{Context as _, bail};
use bytes::Bytes;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;
use tokio::process::{Child, Command};

use crate::args::BUCKET;
use crate::{http, procs};

/// The running fake.
#[derive(Debug)]
pub struct Fake {
    pub addr: SocketAddr,
    child: Child,
}

/// One object in the bucket, as the JSON API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub name: String,
    pub size: u64,
    pub md5: Option<String>,
    pub crc32c: Option<String>,
    pub content_type: Option<String>,
    pub cache_control: Option<String>,
    pub metadata: BTreeMap<String, String>,
}

impl Fake {
    /// Starts `bin` on a free loopback port with the bucket, keeping only objects'
    /// digests and attributes (`--drop-bytes`: a long run writes more than memory
    /// holds; MD5 and crc32c are computed from the bytes received).
    pub async fn start(bin: &Path, seed: u64, log: &Path) -> anyhow::Result<Self> {
        let mut command = Command::new(bin);
        command
            .args([
                "--listen",
                "127.0.0.1:0",
                "--bucket",
                BUCKET,
                "--drop-bytes",
            ])
            .arg("--seed")
            .arg(seed.to_string());
        let proc = procs::start(command, log, "fake-gcs", "addr").await?;
        let addr = proc
            .listening
            .parse()
            .with_context(|| format!("fake-gcs listens on {:?}?", proc.listening))?;
        Ok(Self {
            addr,
            child: proc.child,
        })
    }

    /// Adds a fault plan (TOML) whose offsets count from now.
    pub async fn add_faults(&self, plan: &str) -> anyhow::Result<()> {
        let body = Bytes::from(plan.to_string());
        let (status, answer) =
            http::request(Method::POST, self.addr, "/_fake/faults", body).await?;
        if status != 200 {
            bail!(
                "the fake refused the plan: {status} {}",
                String::from_utf8_lossy(&answer)
            );
        }
        Ok(())
    }

    /// Removes every fault: the store is healthy.
    pub async fn heal(&self) -> anyhow::Result<()> {
        let (status, _) =
            http::request(Method::DELETE, self.addr, "/_fake/faults", Bytes::new()).await?;
        if status != 200 {
            bail!("DELETE /_fake/faults: {status}");
        }
        Ok(())
    }

    /// Every object in the bucket, page by page.
    pub async fn list(&self) -> anyhow::Result<Vec<Object>> {
        let mut objects = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut path = format!("/storage/v1/b/{BUCKET}/o?maxResults=1000");
            if let Some(token) = &token {
                path.push_str("&pageToken=");
                path.extend(utf8_percent_encode(token, NON_ALPHANUMERIC));
            }
            let body = http::get_ok(self.addr, &path).await?;
            let page: Value = serde_json::from_slice(&body).context("the listing is not JSON")?;
            for item in page["items"].as_array().into_iter().flatten() {
                objects.push(Object::from_resource(item)?);
            }
            match page["nextPageToken"].as_str() {
                Some(next) => token = Some(next.to_string()),
                None => return Ok(objects),
            }
        }
    }

    /// Stops it.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        procs::kill_now(&mut self.child).await?;
        Ok(())
    }
}

impl Object {
    /// Reads a JSON API object resource.
    pub fn from_resource(item: &Value) -> anyhow::Result<Self> {
        let text = |key: &str| item[key].as_str().map(str::to_string);
        let name = text("name").context("an object without a name")?;
        let size = text("size")
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("{name:?}: no size"))?;
        let metadata = item["metadata"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        Ok(Self {
            name,
            size,
            md5: text("md5Hash"),
            crc32c: text("crc32c"),
            content_type: text("contentType"),
            cache_control: text("cacheControl"),
            metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_resource_becomes_an_object_with_its_attributes() {
        let item = json!({
            "name": "a b/é", "size": "12", "md5Hash": "m", "crc32c": "c",
            "contentType": "text/plain", "metadata": {"k": "v"}
        });
        let object = Object::from_resource(&item).unwrap();
        assert_eq!(object.name, "a b/é");
        assert_eq!(object.size, 12);
        assert_eq!(object.cache_control, None);
        assert_eq!(object.metadata.get("k").map(String::as_str), Some("v"));
        assert!(Object::from_resource(&json!({"name": "x"})).is_err());
    }
}
