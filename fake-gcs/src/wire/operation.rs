//! What each request does, by the JSON API method names the storage-testbench
//! uses (`storage.objects.insert`, `storage.bucket_acl.get`, ...), shared by the
//! fault model, the testbench instructions, the statistics and the request events.

use std::fmt;
use std::str::FromStr;

/// Declares [`Operation`]: each variant with its doc, its testbench name and
/// whether it changes state (fault windows with `ops = "writes"` take it).
macro_rules! operations {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal, $write:literal;)*) => {
        /// The Cloud Storage operation a request performs.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Operation {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Operation {
            /// Every operation, in order.
            pub(crate) const ALL: &'static [Operation] = &[$(Operation::$variant,)*];

            /// The JSON API method name (`storage.objects.insert`), as the
            /// storage-testbench and the retry conformance tests name it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Operation::$variant => $name,)*
                }
            }

            /// Whether the operation changes state (fault windows with
            /// `ops = "writes"`).
            pub(crate) fn is_write(self) -> bool {
                match self {
                    $(Operation::$variant => $write,)*
                }
            }
        }
    };
}

operations! {
    /// `storage.buckets.list`: `GET /storage/v1/b`.
    BucketsList => "storage.buckets.list", false;
    /// `storage.buckets.get`: `GET /storage/v1/b/{bucket}`.
    BucketsGet => "storage.buckets.get", false;
    /// `storage.buckets.insert`: `POST /storage/v1/b`.
    BucketsInsert => "storage.buckets.insert", true;
    /// `storage.buckets.patch`: `PATCH /storage/v1/b/{bucket}`.
    BucketsPatch => "storage.buckets.patch", true;
    /// `storage.buckets.update`: `PUT /storage/v1/b/{bucket}`.
    BucketsUpdate => "storage.buckets.update", true;
    /// `storage.buckets.delete`: `DELETE /storage/v1/b/{bucket}`.
    BucketsDelete => "storage.buckets.delete", true;
    /// `storage.buckets.lockRetentionPolicy`: `POST .../lockRetentionPolicy`.
    BucketsLockRetentionPolicy => "storage.buckets.lockRetentionPolicy", true;
    /// `storage.buckets.getIamPolicy`: `GET /storage/v1/b/{bucket}/iam`.
    BucketsGetIamPolicy => "storage.buckets.getIamPolicy", false;
    /// `storage.buckets.setIamPolicy`: `PUT /storage/v1/b/{bucket}/iam`.
    BucketsSetIamPolicy => "storage.buckets.setIamPolicy", true;
    /// `storage.buckets.testIamPermissions`: `GET .../iam/testPermissions`.
    BucketsTestIamPermissions => "storage.buckets.testIamPermissions", false;
    /// `storage.bucket_acl.list`: `GET /storage/v1/b/{bucket}/acl`.
    BucketAclList => "storage.bucket_acl.list", false;
    /// `storage.bucket_acl.get`: `GET .../acl/{entity}`.
    BucketAclGet => "storage.bucket_acl.get", false;
    /// `storage.bucket_acl.insert`: `POST .../acl`.
    BucketAclInsert => "storage.bucket_acl.insert", true;
    /// `storage.bucket_acl.update`: `PUT .../acl/{entity}`.
    BucketAclUpdate => "storage.bucket_acl.update", true;
    /// `storage.bucket_acl.patch`: `PATCH .../acl/{entity}`.
    BucketAclPatch => "storage.bucket_acl.patch", true;
    /// `storage.bucket_acl.delete`: `DELETE .../acl/{entity}`.
    BucketAclDelete => "storage.bucket_acl.delete", true;
    /// `storage.default_object_acl.list`: `GET .../defaultObjectAcl`.
    DefaultObjectAclList => "storage.default_object_acl.list", false;
    /// `storage.default_object_acl.get`: `GET .../defaultObjectAcl/{entity}`.
    DefaultObjectAclGet => "storage.default_object_acl.get", false;
    /// `storage.default_object_acl.insert`: `POST .../defaultObjectAcl`.
    DefaultObjectAclInsert => "storage.default_object_acl.insert", true;
    /// `storage.default_object_acl.update`: `PUT .../defaultObjectAcl/{entity}`.
    DefaultObjectAclUpdate => "storage.default_object_acl.update", true;
    /// `storage.default_object_acl.patch`: `PATCH .../defaultObjectAcl/{entity}`.
    DefaultObjectAclPatch => "storage.default_object_acl.patch", true;
    /// `storage.default_object_acl.delete`: `DELETE .../defaultObjectAcl/{entity}`.
    DefaultObjectAclDelete => "storage.default_object_acl.delete", true;
    /// `storage.notifications.list`: `GET .../notificationConfigs`.
    NotificationsList => "storage.notifications.list", false;
    /// `storage.notifications.get`: `GET .../notificationConfigs/{id}`.
    NotificationsGet => "storage.notifications.get", false;
    /// `storage.notifications.insert`: `POST .../notificationConfigs`.
    NotificationsInsert => "storage.notifications.insert", true;
    /// `storage.notifications.delete`: `DELETE .../notificationConfigs/{id}`.
    NotificationsDelete => "storage.notifications.delete", true;
    /// `storage.objects.list`: JSON `GET .../o` or XML `GET /{bucket}`.
    ObjectsList => "storage.objects.list", false;
    /// `storage.objects.get`: metadata, `alt=media`, XML `GET`/`HEAD`.
    ObjectsGet => "storage.objects.get", false;
    /// `storage.objects.insert`: every upload request (media, multipart, each
    /// resumable request) and XML `PUT`.
    ObjectsInsert => "storage.objects.insert", true;
    /// `storage.objects.delete`: JSON or XML `DELETE` of an object.
    ObjectsDelete => "storage.objects.delete", true;
    /// `storage.objects.compose`: `POST .../o/{destination}/compose`.
    ObjectsCompose => "storage.objects.compose", true;
    /// `storage.objects.patch`: `PATCH /storage/v1/b/{bucket}/o/{object}`.
    ObjectsPatch => "storage.objects.patch", true;
    /// `storage.objects.update`: `PUT /storage/v1/b/{bucket}/o/{object}`.
    ObjectsUpdate => "storage.objects.update", true;
    /// `storage.objects.copy`: `POST .../o/{object}/copyTo/b/{bucket}/o/{object}`.
    ObjectsCopy => "storage.objects.copy", true;
    /// `storage.objects.rewrite`: `POST .../o/{object}/rewriteTo/b/{bucket}/o/{object}`.
    ObjectsRewrite => "storage.objects.rewrite", true;
    /// `storage.objects.move`: `POST .../o/{object}/moveTo/o/{object}`.
    ObjectsMove => "storage.objects.move", true;
    /// `storage.managedFolders.insert`: `POST /storage/v1/b/{bucket}/managedFolders`.
    ManagedFoldersInsert => "storage.managedFolders.insert", true;
    /// `storage.managedFolders.get`: `GET .../managedFolders/{folder}`.
    ManagedFoldersGet => "storage.managedFolders.get", false;
    /// `storage.managedFolders.list`: `GET .../managedFolders`.
    ManagedFoldersList => "storage.managedFolders.list", false;
    /// `storage.managedFolders.delete`: `DELETE .../managedFolders/{folder}`.
    ManagedFoldersDelete => "storage.managedFolders.delete", true;
    /// `storage.managedFolders.getIamPolicy`: `GET .../managedFolders/{folder}/iam`.
    ManagedFoldersGetIamPolicy => "storage.managedFolders.getIamPolicy", false;
    /// `storage.managedFolders.setIamPolicy`: `PUT .../managedFolders/{folder}/iam`.
    ManagedFoldersSetIamPolicy => "storage.managedFolders.setIamPolicy", true;
    /// `storage.object_acl.list`: `GET .../o/{object}/acl`.
    ObjectAclList => "storage.object_acl.list", false;
    /// `storage.object_acl.get`: `GET .../o/{object}/acl/{entity}`.
    ObjectAclGet => "storage.object_acl.get", false;
    /// `storage.object_acl.insert`: `POST .../o/{object}/acl`.
    ObjectAclInsert => "storage.object_acl.insert", true;
    /// `storage.object_acl.update`: `PUT .../o/{object}/acl/{entity}`.
    ObjectAclUpdate => "storage.object_acl.update", true;
    /// `storage.object_acl.patch`: `PATCH .../o/{object}/acl/{entity}`.
    ObjectAclPatch => "storage.object_acl.patch", true;
    /// `storage.object_acl.delete`: `DELETE .../o/{object}/acl/{entity}`.
    ObjectAclDelete => "storage.object_acl.delete", true;
    /// `storage.hmacKey.create`: `POST /storage/v1/projects/{project}/hmacKeys`.
    HmacKeyCreate => "storage.hmacKey.create", true;
    /// `storage.hmacKey.list`: `GET /storage/v1/projects/{project}/hmacKeys`.
    HmacKeyList => "storage.hmacKey.list", false;
    /// `storage.hmacKey.get`: `GET .../hmacKeys/{accessId}`.
    HmacKeyGet => "storage.hmacKey.get", false;
    /// `storage.hmacKey.update`: `PUT .../hmacKeys/{accessId}`.
    HmacKeyUpdate => "storage.hmacKey.update", true;
    /// `storage.hmacKey.delete`: `DELETE .../hmacKeys/{accessId}`.
    HmacKeyDelete => "storage.hmacKey.delete", true;
    /// `storage.serviceaccount.get`: `GET /storage/v1/projects/{project}/serviceAccount`.
    ServiceAccountGet => "storage.serviceaccount.get", false;
    /// The storage-testbench control endpoints (`/retry_test`); never faulted.
    RetryTest => "retry_test", false;
    /// The fake's own control API (`/_fake/...`); never faulted, and not counted
    /// in the statistics it reports.
    FakeControl => "fake_control", false;
    /// A route the fake does not serve (404); never faulted.
    Unknown => "unknown", false;
}

impl Operation {
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
            .iter()
            .copied()
            .find(|op| op.name() == s)
            .ok_or_else(|| format!("unknown operation {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_distinct_and_parses_back() {
        for op in Operation::ALL {
            assert_eq!(op.name().parse::<Operation>(), Ok(*op));
        }
        let mut names: Vec<_> = Operation::ALL.iter().map(|op| op.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Operation::ALL.len());
        assert!(Operation::HmacKeyUpdate.is_write() && !Operation::BucketAclGet.is_write());
    }
}
