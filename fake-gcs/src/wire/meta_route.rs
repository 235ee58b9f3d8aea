//! The JSON API's requests about resources other than object bytes: buckets
//! (insert, patch, update, delete, retention lock, IAM), access control lists,
//! notification configurations, managed folders, object metadata (patch, update), copies,
//! rewrites and moves, HMAC keys and the project's service account. [`MetaRoute::parse`]
//! names the request; [`crate::wire::Route`] keeps the requests that move object
//! bytes, and answers 404 for these (a server that serves them, such as the fake,
//! parses with [`MetaRoute`] first).
//!
//! | path under `/storage/v1` | methods |
//! |---|---|
//! | `/b` | `POST` (insert) |
//! | `/b/{b}` | `PATCH`, `PUT`, `DELETE` |
//! | `/b/{b}/lockRetentionPolicy` | `POST` |
//! | `/b/{b}/iam`, `/b/{b}/iam/testPermissions` | `GET`, `PUT`; `GET` |
//! | `/b/{b}/acl[/{entity}]`, `/b/{b}/defaultObjectAcl[/{entity}]` | `GET`, `POST`; `GET`, `PUT`, `PATCH`, `DELETE` |
//! | `/b/{b}/notificationConfigs[/{id}]` | `GET`, `POST`; `GET`, `DELETE` |
//! | `/b/{b}/managedFolders[/{f}]`, `/b/{b}/managedFolders/{f}/iam` | `GET`, `POST`; `GET`, `DELETE`; `GET`, `PUT` |
//! | `/b/{b}/o/{o}` | `PATCH`, `PUT` |
//! | `/b/{b}/o/{o}/acl[/{entity}]` | as the bucket's |
//! | `/b/{b}/o/{o}/copyTo/b/{b}/o/{o}`, `.../rewriteTo/b/{b}/o/{o}` | `POST` |
//! | `/b/{b}/o/{o}/moveTo/o/{o}` | `POST` |
//! | `/projects/{p}/hmacKeys[/{accessId}]` | `GET`, `POST`; `GET`, `PUT`, `DELETE` |
//! | `/projects/{p}/serviceAccount` | `GET` |

use http::Method;

use crate::wire::encoding::decode_path;
use crate::wire::operation::Operation;
use crate::wire::route::{Api, Route};

/// What a request does to a collection or one of its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `GET` of the collection.
    List,
    /// `GET` of a member.
    Get,
    /// `POST` to the collection.
    Insert,
    /// `PUT` of a member: replaces it.
    Update,
    /// `PATCH` of a member: changes the fields given.
    Patch,
    /// `DELETE` of a member.
    Delete,
}

/// Whose access control list a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AclScope {
    /// The bucket's own (`/b/{b}/acl`).
    Bucket,
    /// The ACL new objects get (`/b/{b}/defaultObjectAcl`).
    DefaultObject,
    /// An object's (`/b/{b}/o/{o}/acl`).
    Object,
}

/// A JSON API request about metadata (see the module's table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaRoute {
    /// `POST /storage/v1/b`: the bucket is named in the body.
    BucketInsert,
    /// `PATCH`, `PUT` or `DELETE /storage/v1/b/{bucket}`.
    Bucket {
        /// The bucket.
        bucket: String,
        /// [`Verb::Patch`], [`Verb::Update`] or [`Verb::Delete`].
        verb: Verb,
    },
    /// `POST /storage/v1/b/{bucket}/lockRetentionPolicy`.
    LockRetentionPolicy {
        /// The bucket.
        bucket: String,
    },
    /// `GET` (`set: false`) or `PUT` (`set: true`) `/storage/v1/b/{bucket}/iam`.
    Iam {
        /// The bucket.
        bucket: String,
        /// Whether the policy is replaced.
        set: bool,
    },
    /// `GET /storage/v1/b/{bucket}/iam/testPermissions`.
    TestIamPermissions {
        /// The bucket.
        bucket: String,
    },
    /// An access control list or one of its entries.
    Acl {
        /// Whose list.
        scope: AclScope,
        /// The bucket.
        bucket: String,
        /// The object, for [`AclScope::Object`].
        object: Option<String>,
        /// The entry (`user-a@b.c`, `allUsers`, ...), for a member's verbs.
        entity: Option<String>,
        /// What is done.
        verb: Verb,
    },
    /// A bucket's notification configurations or one of them.
    Notifications {
        /// The bucket.
        bucket: String,
        /// The configuration's id, for [`Verb::Get`] and [`Verb::Delete`].
        id: Option<String>,
        /// What is done.
        verb: Verb,
    },
    /// A bucket's managed folders or one of them (its name percent-decoded, as
    /// given: the API adds the trailing `/`).
    ManagedFolders {
        /// The bucket.
        bucket: String,
        /// The folder, for [`Verb::Get`] and [`Verb::Delete`].
        folder: Option<String>,
        /// What is done.
        verb: Verb,
    },
    /// `GET` (`set: false`) or `PUT` (`set: true`) of a managed folder's IAM policy.
    ManagedFolderIam {
        /// The bucket.
        bucket: String,
        /// The folder.
        folder: String,
        /// Whether the policy is replaced.
        set: bool,
    },
    /// `PATCH` ([`Verb::Patch`]) or `PUT` ([`Verb::Update`]) of an object's metadata.
    Object {
        /// The bucket.
        bucket: String,
        /// The object.
        name: String,
        /// What is done.
        verb: Verb,
    },
    /// `copyTo` (`rewrite: false`) or `rewriteTo` (`rewrite: true`).
    Copy {
        /// Whether this is a rewrite (which answers a rewrite response).
        rewrite: bool,
        /// The source's bucket.
        source_bucket: String,
        /// The source object.
        source: String,
        /// The destination's bucket.
        bucket: String,
        /// The destination object.
        name: String,
    },
    /// `POST /storage/v1/b/{bucket}/o/{source}/moveTo/o/{name}`: a rename within
    /// the bucket.
    Move {
        /// The bucket.
        bucket: String,
        /// The object moved.
        source: String,
        /// Its new name.
        name: String,
    },
    /// A project's HMAC keys or one of them.
    HmacKeys {
        /// The project.
        project: String,
        /// The key's access id, for a member's verbs.
        access_id: Option<String>,
        /// What is done.
        verb: Verb,
    },
    /// `GET /storage/v1/projects/{project}/serviceAccount`.
    ServiceAccount {
        /// The project.
        project: String,
    },
}

type Parsed = Option<Result<MetaRoute, Route>>;

impl MetaRoute {
    /// The metadata request `method path` makes: `None` when the path is not one
    /// of the module's table (the caller routes it with [`Route::parse`]),
    /// `Some(Err(route))` for a method the path does not take or a name that is not
    /// UTF-8 (the route to answer with).
    pub fn parse(method: &Method, path: &str) -> Parsed {
        let parser = Parser { method, path };
        if path.starts_with("/storage/v1/")
            && let Some(message) = crate::wire::route::ambiguous_path(path)
        {
            let api = Api::Json;
            return Some(Err(Route::Invalid {
                api,
                status: 400,
                message,
            }));
        }
        if path == "/storage/v1/b" {
            return (method == Method::POST).then_some(Ok(MetaRoute::BucketInsert));
        }
        if let Some(rest) = path.strip_prefix("/storage/v1/projects/") {
            return Some(parser.project(rest));
        }
        let rest = path.strip_prefix("/storage/v1/b/")?;
        let (bucket, tail) = rest.split_once('/').unwrap_or((rest, ""));
        if let Some(object) = tail.strip_prefix("o/") {
            return parser.object(bucket, object);
        }
        parser.bucket(bucket, tail)
    }

    /// The operation, as the storage-testbench names it.
    pub fn operation(&self) -> Operation {
        use Operation as Op;
        match self {
            MetaRoute::BucketInsert => Op::BucketsInsert,
            MetaRoute::Bucket { verb, .. } => match verb {
                Verb::Update => Op::BucketsUpdate,
                Verb::Delete => Op::BucketsDelete,
                _ => Op::BucketsPatch,
            },
            MetaRoute::LockRetentionPolicy { .. } => Op::BucketsLockRetentionPolicy,
            MetaRoute::Iam { set: false, .. } => Op::BucketsGetIamPolicy,
            MetaRoute::Iam { set: true, .. } => Op::BucketsSetIamPolicy,
            MetaRoute::TestIamPermissions { .. } => Op::BucketsTestIamPermissions,
            MetaRoute::Acl { scope, verb, .. } => acl_operation(*scope, *verb),
            MetaRoute::Notifications { verb, .. } => match verb {
                Verb::List => Op::NotificationsList,
                Verb::Insert => Op::NotificationsInsert,
                Verb::Delete => Op::NotificationsDelete,
                _ => Op::NotificationsGet,
            },
            MetaRoute::ManagedFolders { verb, .. } => match verb {
                Verb::List => Op::ManagedFoldersList,
                Verb::Insert => Op::ManagedFoldersInsert,
                Verb::Delete => Op::ManagedFoldersDelete,
                _ => Op::ManagedFoldersGet,
            },
            MetaRoute::ManagedFolderIam { set: false, .. } => Op::ManagedFoldersGetIamPolicy,
            MetaRoute::ManagedFolderIam { set: true, .. } => Op::ManagedFoldersSetIamPolicy,
            MetaRoute::Object { verb, .. } => match verb {
                Verb::Update => Op::ObjectsUpdate,
                _ => Op::ObjectsPatch,
            },
            MetaRoute::Copy { rewrite: false, .. } => Op::ObjectsCopy,
            MetaRoute::Copy { rewrite: true, .. } => Op::ObjectsRewrite,
            MetaRoute::Move { .. } => Op::ObjectsMove,
            MetaRoute::HmacKeys { verb, .. } => match verb {
                Verb::List => Op::HmacKeyList,
                Verb::Insert => Op::HmacKeyCreate,
                Verb::Update | Verb::Patch => Op::HmacKeyUpdate,
                Verb::Delete => Op::HmacKeyDelete,
                Verb::Get => Op::HmacKeyGet,
            },
            MetaRoute::ServiceAccount { .. } => Op::ServiceAccountGet,
        }
    }

    /// The bucket named in the path, if any (a copy's destination bucket).
    pub fn bucket(&self) -> Option<&str> {
        match self {
            MetaRoute::Bucket { bucket, .. }
            | MetaRoute::LockRetentionPolicy { bucket }
            | MetaRoute::Iam { bucket, .. }
            | MetaRoute::TestIamPermissions { bucket }
            | MetaRoute::Acl { bucket, .. }
            | MetaRoute::Notifications { bucket, .. }
            | MetaRoute::ManagedFolders { bucket, .. }
            | MetaRoute::ManagedFolderIam { bucket, .. }
            | MetaRoute::Object { bucket, .. }
            | MetaRoute::Copy { bucket, .. }
            | MetaRoute::Move { bucket, .. } => Some(bucket),
            MetaRoute::BucketInsert
            | MetaRoute::HmacKeys { .. }
            | MetaRoute::ServiceAccount { .. } => None,
        }
    }

    /// The object named in the path, if any (a copy's or move's destination).
    pub fn object(&self) -> Option<&str> {
        match self {
            MetaRoute::Object { name, .. }
            | MetaRoute::Copy { name, .. }
            | MetaRoute::Move { name, .. } => Some(name),
            MetaRoute::Acl { object, .. } => object.as_deref(),
            _ => None,
        }
    }
}

/// A Cloud Storage request as a server that serves both kinds routes it: a JSON
/// API path is first a metadata request ([`MetaRoute`]), as Cloud Storage reads
/// `DELETE .../o/a/acl/x` (an ACL entry's, not the object `a/acl/x`'s); what is
/// not one is a [`Route`]. The fake routes this way, and the relay's pass-through
/// property holds what it sends upstream to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    /// A metadata request.
    Meta(MetaRoute),
    /// A request [`Route::parse`] names (an invalid metadata request included).
    Api(Route),
}

impl Routed {
    /// The request `method uri` makes.
    pub fn parse(method: &Method, uri: &http::Uri, query: &crate::wire::Query) -> Routed {
        if query.not_utf8().is_none() {
            match MetaRoute::parse(method, uri.path()) {
                Some(Ok(meta)) => return Routed::Meta(meta),
                Some(Err(invalid)) => return Routed::Api(invalid),
                None => {}
            }
        }
        Routed::Api(Route::parse(method, uri, query))
    }

    /// Every bucket the path names: a copy's or rewrite's source and destination.
    pub fn buckets(&self) -> Vec<&str> {
        match self {
            Routed::Meta(MetaRoute::Copy {
                source_bucket,
                bucket,
                ..
            }) => vec![source_bucket, bucket],
            Routed::Meta(meta) => meta.bucket().into_iter().collect(),
            Routed::Api(route) => route.bucket().into_iter().collect(),
        }
    }
}

fn acl_operation(scope: AclScope, verb: Verb) -> Operation {
    use Operation as Op;
    let ops = match scope {
        AclScope::Bucket => [
            Op::BucketAclList,
            Op::BucketAclGet,
            Op::BucketAclInsert,
            Op::BucketAclUpdate,
            Op::BucketAclPatch,
            Op::BucketAclDelete,
        ],
        AclScope::DefaultObject => [
            Op::DefaultObjectAclList,
            Op::DefaultObjectAclGet,
            Op::DefaultObjectAclInsert,
            Op::DefaultObjectAclUpdate,
            Op::DefaultObjectAclPatch,
            Op::DefaultObjectAclDelete,
        ],
        AclScope::Object => [
            Op::ObjectAclList,
            Op::ObjectAclGet,
            Op::ObjectAclInsert,
            Op::ObjectAclUpdate,
            Op::ObjectAclPatch,
            Op::ObjectAclDelete,
        ],
    };
    ops[verb as usize]
}

/// One request's method and path, being parsed.
struct Parser<'a> {
    method: &'a Method,
    path: &'a str,
}

impl Parser<'_> {
    fn not_found(&self) -> Route {
        Route::not_found(Api::Json, self.method, self.path)
    }

    /// A percent-decoded path segment, or 400 when it is not UTF-8.
    fn decode(&self, segment: &str) -> Result<String, Route> {
        decode_path(segment).ok_or_else(|| Route::Invalid {
            api: Api::Json,
            status: 400,
            message: format!("path segment {segment:?} is not UTF-8 after percent-decoding"),
        })
    }

    /// The verb of a collection (`member: false`) or member request, when the
    /// method is one `allowed` there.
    fn verb(&self, member: bool, allowed: &[Verb]) -> Result<Verb, Route> {
        let verb = match (self.method, member) {
            (&Method::GET, false) => Verb::List,
            (&Method::POST, false) => Verb::Insert,
            (&Method::GET, true) => Verb::Get,
            (&Method::PUT, true) => Verb::Update,
            (&Method::PATCH, true) => Verb::Patch,
            (&Method::DELETE, true) => Verb::Delete,
            _ => return Err(self.not_found()),
        };
        match allowed.contains(&verb) {
            true => Ok(verb),
            false => Err(self.not_found()),
        }
    }

    /// `/storage/v1/projects/{rest}`: HMAC keys and the service account.
    fn project(&self, rest: &str) -> Result<MetaRoute, Route> {
        let mut parts = rest.splitn(3, '/');
        let (project, kind, id) = (parts.next(), parts.next(), parts.next());
        let project = self.decode(project.unwrap_or(""))?;
        match (kind, id) {
            (Some("serviceAccount"), None) if self.method == Method::GET => {
                Ok(MetaRoute::ServiceAccount { project })
            }
            (Some("hmacKeys"), None) => Ok(MetaRoute::HmacKeys {
                project,
                access_id: None,
                verb: self.verb(false, &[Verb::List, Verb::Insert])?,
            }),
            (Some("hmacKeys"), Some(id)) if !id.is_empty() && !id.contains('/') => {
                let allowed = [Verb::Get, Verb::Update, Verb::Delete];
                Ok(MetaRoute::HmacKeys {
                    project,
                    access_id: Some(self.decode(id)?),
                    verb: self.verb(true, &allowed)?,
                })
            }
            _ => Err(self.not_found()),
        }
    }

    /// `/storage/v1/b/{bucket}/{tail}` for what is not an object.
    fn bucket(&self, bucket: &str, tail: &str) -> Parsed {
        let bucket = match self.decode(bucket) {
            Ok(bucket) => bucket,
            Err(invalid) => return Some(Err(invalid)),
        };
        let (first, rest) = match tail.split_once('/') {
            Some((first, rest)) => (first, Some(rest)),
            None => (tail, None),
        };
        let route = match (first, rest) {
            ("", None) => match *self.method {
                Method::PATCH => Ok(Verb::Patch),
                Method::PUT => Ok(Verb::Update),
                Method::DELETE => Ok(Verb::Delete),
                // `GET` (and anything else) is the object route's to answer.
                _ => return None,
            }
            .map(|verb| MetaRoute::Bucket { bucket, verb }),
            ("lockRetentionPolicy", None) if self.method == Method::POST => {
                Ok(MetaRoute::LockRetentionPolicy { bucket })
            }
            ("iam", None) => match *self.method {
                Method::GET => Ok(MetaRoute::Iam { bucket, set: false }),
                Method::PUT => Ok(MetaRoute::Iam { bucket, set: true }),
                _ => Err(self.not_found()),
            },
            ("iam", Some("testPermissions")) if self.method == Method::GET => {
                Ok(MetaRoute::TestIamPermissions { bucket })
            }
            ("acl", entity) => self.acl(AclScope::Bucket, bucket, None, entity),
            ("defaultObjectAcl", entity) => self.acl(AclScope::DefaultObject, bucket, None, entity),
            ("notificationConfigs", id) => self.notifications(bucket, id),
            ("managedFolders", rest) => self.managed_folders(bucket, rest),
            ("o", _) => return None,
            _ => Err(self.not_found()),
        };
        Some(route)
    }

    fn acl(
        &self,
        scope: AclScope,
        bucket: String,
        object: Option<String>,
        entity: Option<&str>,
    ) -> Result<MetaRoute, Route> {
        let member = entity.filter(|e| !e.is_empty());
        if member.is_some_and(|e| e.contains('/')) {
            return Err(self.not_found());
        }
        let verb = match member {
            None => self.verb(false, &[Verb::List, Verb::Insert])?,
            Some(_) => self.verb(true, &[Verb::Get, Verb::Update, Verb::Patch, Verb::Delete])?,
        };
        Ok(MetaRoute::Acl {
            scope,
            bucket,
            object,
            entity: member.map(|e| self.decode(e)).transpose()?,
            verb,
        })
    }

    fn notifications(&self, bucket: String, id: Option<&str>) -> Result<MetaRoute, Route> {
        let member = id.filter(|i| !i.is_empty());
        if member.is_some_and(|i| i.contains('/')) {
            return Err(self.not_found());
        }
        let verb = match member {
            None => self.verb(false, &[Verb::List, Verb::Insert])?,
            Some(_) => self.verb(true, &[Verb::Get, Verb::Delete])?,
        };
        Ok(MetaRoute::Notifications {
            bucket,
            id: member.map(|i| self.decode(i)).transpose()?,
            verb,
        })
    }

    /// `managedFolders[/{folder}[/iam]]`: names arrive percent-encoded, so a
    /// literal `/` separates the folder from `iam`.
    fn managed_folders(&self, bucket: String, rest: Option<&str>) -> Result<MetaRoute, Route> {
        let member = rest.filter(|r| !r.is_empty());
        let Some(member) = member else {
            let verb = self.verb(false, &[Verb::List, Verb::Insert])?;
            let folder = None;
            return Ok(MetaRoute::ManagedFolders {
                bucket,
                folder,
                verb,
            });
        };
        if let Some(folder) = member.strip_suffix("/iam") {
            let set = match *self.method {
                Method::GET => false,
                Method::PUT => true,
                _ => return Err(self.not_found()),
            };
            let folder = self.decode(folder)?;
            return Ok(MetaRoute::ManagedFolderIam {
                bucket,
                folder,
                set,
            });
        }
        if member.contains('/') {
            return Err(self.not_found());
        }
        let verb = self.verb(true, &[Verb::Get, Verb::Delete])?;
        let folder = Some(self.decode(member)?);
        Ok(MetaRoute::ManagedFolders {
            bucket,
            folder,
            verb,
        })
    }

    /// `/storage/v1/b/{bucket}/o/{rest}`: copies, rewrites, moves, object ACLs, and
    /// `PATCH`/`PUT` of the object. Names arrive percent-encoded, so a literal `/`
    /// separates the object from what follows it.
    fn object(&self, bucket: &str, rest: &str) -> Parsed {
        for (marker, rewrite) in [("/copyTo/b/", false), ("/rewriteTo/b/", true)] {
            if let Some((source, destination)) = rest.split_once(marker) {
                return Some(self.copy(rewrite, bucket, source, destination));
            }
        }
        if let Some((source, name)) = rest.split_once("/moveTo/o/") {
            return Some(self.moved(bucket, source, name));
        }
        let decoded = |s| self.decode(s);
        let acl = match rest.strip_suffix("/acl") {
            Some(name) => Some((name, None)),
            None => rest
                .rsplit_once("/acl/")
                .filter(|(_, entity)| !entity.contains('/'))
                .map(|(name, entity)| (name, Some(entity))),
        };
        if let Some((name, entity)) = acl {
            let route = decoded(bucket).and_then(|bucket| {
                let object = Some(decoded(name)?);
                self.acl(AclScope::Object, bucket, object, entity)
            });
            return Some(route);
        }
        let verb = match *self.method {
            Method::PATCH => Verb::Patch,
            Method::PUT => Verb::Update,
            _ => return None,
        };
        let route = decoded(bucket).and_then(|bucket| {
            let name = decoded(rest)?;
            Ok(MetaRoute::Object { bucket, name, verb })
        });
        Some(route)
    }

    fn copy(
        &self,
        rewrite: bool,
        source_bucket: &str,
        source: &str,
        destination: &str,
    ) -> Result<MetaRoute, Route> {
        let Some((bucket, name)) = destination.split_once("/o/") else {
            return Err(self.not_found());
        };
        if self.method != Method::POST {
            return Err(self.not_found());
        }
        Ok(MetaRoute::Copy {
            rewrite,
            source_bucket: self.decode(source_bucket)?,
            source: self.decode(source)?,
            bucket: self.decode(bucket)?,
            name: self.decode(name)?,
        })
    }

    /// `{source}/moveTo/o/{name}`, `POST` only.
    fn moved(&self, bucket: &str, source: &str, name: &str) -> Result<MetaRoute, Route> {
        if self.method != Method::POST {
            return Err(self.not_found());
        }
        Ok(MetaRoute::Move {
            bucket: self.decode(bucket)?,
            source: self.decode(source)?,
            name: self.decode(name)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: Method, path: &str) -> Parsed {
        MetaRoute::parse(&method, path)
    }

    fn route(method: Method, path: &str) -> MetaRoute {
        match parse(method, path) {
            Some(Ok(route)) => route,
            other => panic!("{path}: {other:?}"),
        }
    }

    fn not_found(method: Method, path: &str) -> bool {
        matches!(
            parse(method, path),
            Some(Err(Route::Invalid {
                status: 404,
                api: Api::Json,
                ..
            }))
        )
    }

    #[test]
    fn buckets_and_their_lists_route_by_method() {
        assert_eq!(
            route(Method::POST, "/storage/v1/b"),
            MetaRoute::BucketInsert
        );
        assert_eq!(parse(Method::GET, "/storage/v1/b"), None);
        assert_eq!(parse(Method::GET, "/storage/v1/b/bkt"), None);
        assert_eq!(parse(Method::GET, "/storage/v1/b/bkt/o"), None);
        let patch = route(Method::PATCH, "/storage/v1/b/bkt");
        assert_eq!(patch.operation(), Operation::BucketsPatch);
        assert_eq!(
            route(Method::DELETE, "/storage/v1/b/bkt").operation(),
            Operation::BucketsDelete
        );
        let acl = route(Method::PATCH, "/storage/v1/b/bkt/acl/user-a%40b.c");
        assert_eq!(acl.operation(), Operation::BucketAclPatch);
        let MetaRoute::Acl { entity, .. } = acl else {
            panic!()
        };
        assert_eq!(entity.as_deref(), Some("user-a@b.c"));
        assert_eq!(
            route(Method::POST, "/storage/v1/b/bkt/defaultObjectAcl").operation(),
            Operation::DefaultObjectAclInsert
        );
        assert_eq!(
            route(Method::GET, "/storage/v1/b/bkt/iam/testPermissions").operation(),
            Operation::BucketsTestIamPermissions
        );
        assert_eq!(
            route(Method::DELETE, "/storage/v1/b/bkt/notificationConfigs/7").operation(),
            Operation::NotificationsDelete
        );
        assert!(not_found(
            Method::PUT,
            "/storage/v1/b/bkt/notificationConfigs/7"
        ));
        assert!(not_found(
            Method::GET,
            "/storage/v1/b/bkt/lockRetentionPolicy"
        ));
        assert!(not_found(Method::GET, "/storage/v1/b/bkt/anywhere"));
        let folder = route(Method::DELETE, "/storage/v1/b/bkt/managedFolders/a%2Fb%2F");
        assert_eq!(folder.operation(), Operation::ManagedFoldersDelete);
        let expected = MetaRoute::ManagedFolders {
            bucket: "bkt".into(),
            folder: Some("a/b/".into()),
            verb: Verb::Delete,
        };
        assert_eq!(folder, expected);
        assert_eq!(
            route(Method::PUT, "/storage/v1/b/bkt/managedFolders/a%2F/iam").operation(),
            Operation::ManagedFoldersSetIamPolicy
        );
        assert_eq!(
            route(Method::GET, "/storage/v1/b/bkt/managedFolders").operation(),
            Operation::ManagedFoldersList
        );
        assert!(not_found(
            Method::PATCH,
            "/storage/v1/b/bkt/managedFolders/a"
        ));
        assert!(not_found(
            Method::GET,
            "/storage/v1/b/bkt/managedFolders/a/b"
        ));
    }

    #[test]
    fn objects_copy_rewrite_and_acls_route_on_encoded_names() {
        let copy = route(
            Method::POST,
            "/storage/v1/b/src/o/a%2Fb/rewriteTo/b/dst/o/c%2Fd",
        );
        assert_eq!(
            copy,
            MetaRoute::Copy {
                rewrite: true,
                source_bucket: "src".into(),
                source: "a/b".into(),
                bucket: "dst".into(),
                name: "c/d".into()
            }
        );
        assert_eq!(copy.object(), Some("c/d"));
        let acl = route(Method::GET, "/storage/v1/b/bkt/o/a%2Fb/acl");
        assert_eq!(acl.operation(), Operation::ObjectAclList);
        assert_eq!(acl.object(), Some("a/b"));
        let entry = route(Method::DELETE, "/storage/v1/b/bkt/o/x/acl/allUsers");
        assert_eq!(entry.operation(), Operation::ObjectAclDelete);
        assert_eq!(
            route(Method::PUT, "/storage/v1/b/bkt/o/x").operation(),
            Operation::ObjectsUpdate
        );
        // Reads, deletes and compose are the object route's.
        assert_eq!(parse(Method::GET, "/storage/v1/b/bkt/o/x"), None);
        assert_eq!(parse(Method::DELETE, "/storage/v1/b/bkt/o/x"), None);
        assert_eq!(parse(Method::POST, "/storage/v1/b/bkt/o/x/compose"), None);
        assert!(not_found(Method::GET, "/storage/v1/b/s/o/x/copyTo/b/d/o/y"));
        let moved = route(Method::POST, "/storage/v1/b/bkt/o/a%2Fb/moveTo/o/c%2Fd");
        assert_eq!(moved.operation(), Operation::ObjectsMove);
        let expected = MetaRoute::Move {
            bucket: "bkt".into(),
            source: "a/b".into(),
            name: "c/d".into(),
        };
        assert_eq!(moved, expected);
        assert_eq!((moved.bucket(), moved.object()), (Some("bkt"), Some("c/d")));
        assert!(not_found(Method::GET, "/storage/v1/b/bkt/o/x/moveTo/o/y"));
    }

    #[test]
    fn projects_serve_hmac_keys_and_the_service_account_only() {
        let key = route(Method::PUT, "/storage/v1/projects/p/hmacKeys/GOOG1");
        assert_eq!(key.operation(), Operation::HmacKeyUpdate);
        assert_eq!(
            route(Method::POST, "/storage/v1/projects/p/hmacKeys").operation(),
            Operation::HmacKeyCreate
        );
        assert_eq!(
            route(Method::GET, "/storage/v1/projects/p/serviceAccount"),
            MetaRoute::ServiceAccount {
                project: "p".into()
            }
        );
        assert!(not_found(
            Method::PATCH,
            "/storage/v1/projects/p/hmacKeys/k"
        ));
        assert!(not_found(Method::GET, "/storage/v1/projects/p/buckets"));
        assert!(not_found(
            Method::PUT,
            "/storage/v1/projects/p/hmacKeys/k/x"
        ));
    }
}
