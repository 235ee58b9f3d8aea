//! What each request does, by the JSON API method names the storage-testbench
//! uses (`storage.objects.insert`, ...), shared by the fault model, the testbench
//! instructions, the statistics and the request events.

use std::fmt;
use std::str::FromStr;

/// The Cloud Storage operation a request performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// `storage.buckets.list`: `GET /storage/v1/b`.
    BucketsList,
    /// `storage.buckets.get`: `GET /storage/v1/b/{bucket}`.
    BucketsGet,
    /// `storage.objects.list`: JSON `GET .../o` or XML `GET /{bucket}`.
    ObjectsList,
    /// `storage.objects.get`: metadata, `alt=media`, XML `GET`/`HEAD`.
    ObjectsGet,
    /// `storage.objects.insert`: every upload request (media, multipart, each
    /// resumable request) and XML `PUT`.
    ObjectsInsert,
    /// `storage.objects.delete`: JSON or XML `DELETE` of an object.
    ObjectsDelete,
    /// `storage.objects.compose`: `POST .../o/{destination}/compose`.
    ObjectsCompose,
    /// The storage-testbench control endpoints (`/retry_test`); never faulted.
    RetryTest,
    /// The fake's own control API (`/_fake/...`); never faulted, and not counted
    /// in the statistics it reports.
    FakeControl,
    /// A route the fake does not serve (404); never faulted.
    Unknown,
}

impl Operation {
    /// Every operation, in order.
    pub(crate) const ALL: [Operation; 10] = [
        Operation::BucketsList,
        Operation::BucketsGet,
        Operation::ObjectsList,
        Operation::ObjectsGet,
        Operation::ObjectsInsert,
        Operation::ObjectsDelete,
        Operation::ObjectsCompose,
        Operation::RetryTest,
        Operation::FakeControl,
        Operation::Unknown,
    ];

    /// The JSON API method name (`storage.objects.insert`).
    pub fn name(self) -> &'static str {
        match self {
            Operation::BucketsList => "storage.buckets.list",
            Operation::BucketsGet => "storage.buckets.get",
            Operation::ObjectsList => "storage.objects.list",
            Operation::ObjectsGet => "storage.objects.get",
            Operation::ObjectsInsert => "storage.objects.insert",
            Operation::ObjectsDelete => "storage.objects.delete",
            Operation::ObjectsCompose => "storage.objects.compose",
            Operation::RetryTest => "retry_test",
            Operation::FakeControl => "fake_control",
            Operation::Unknown => "unknown",
        }
    }

    /// Whether the operation changes the bucket (fault windows with `ops = "writes"`).
    pub(crate) fn is_write(self) -> bool {
        matches!(
            self,
            Operation::ObjectsInsert | Operation::ObjectsDelete | Operation::ObjectsCompose
        )
    }

    /// Whether faults (windows, capacity, testbench instructions) apply to it.
    pub(crate) fn is_faultable(self) -> bool {
        !matches!(
            self,
            Operation::RetryTest | Operation::FakeControl | Operation::Unknown
        )
    }

    /// Whether the fake's statistics count it: every request but those of the
    /// fake's own control API, which reads and resets them.
    pub(crate) fn is_counted(self) -> bool {
        self != Operation::FakeControl
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Operation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| format!("unknown operation {s:?}"))
    }
}
