//! What a request asks of the fake, decided from its method and path alone: the
//! fake's own control API (`/_fake/`), the storage-testbench's (`/retry_test`), or
//! Cloud Storage's: a metadata request ([`MetaRoute`]) or one of the requests that
//! move object bytes ([`Route`]). The handler routes with it before anything else;
//! the API serves what it names.

use http::{Method, Uri};

use crate::control::FakeControl;
use crate::retry_test::Control;
use crate::wire::{Api, MetaRoute, Operation, Query, Route, Routed};

/// What a request asks of the fake: its own control API, the storage-testbench's,
/// or Cloud Storage's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Fake(FakeControl),
    Control(Control),
    Meta(MetaRoute),
    Api(Route),
}

impl Target {
    pub(crate) fn parse(method: &Method, uri: &Uri, query: &Query) -> Self {
        let path = uri.path();
        match FakeControl::parse(method, path) {
            Some(Ok(control)) => return Target::Fake(control),
            Some(Err(not_found)) => return Target::Api(not_found),
            None => {}
        }
        match Control::parse(method, path) {
            Some(Ok(control)) => return Target::Control(control),
            Some(Err(not_found)) => return Target::Api(not_found),
            None => {}
        }
        match Routed::parse(method, uri, query) {
            Routed::Meta(meta) => Target::Meta(meta),
            Routed::Api(route) => Target::Api(route),
        }
    }

    pub(crate) fn operation(&self) -> Operation {
        match self {
            Target::Fake(_) => Operation::FakeControl,
            Target::Control(_) => Operation::RetryTest,
            Target::Meta(meta) => meta.operation(),
            Target::Api(route) => route.operation(),
        }
    }

    pub(crate) fn api(&self) -> Api {
        match self {
            Target::Fake(_) | Target::Control(_) | Target::Meta(_) => Api::Json,
            Target::Api(route) => route.api(),
        }
    }

    /// The bucket and object the path names, for the request log.
    pub(crate) fn names(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Target::Fake(_) | Target::Control(_) => (None, None),
            Target::Meta(meta) => (meta.bucket(), meta.object()),
            Target::Api(route) => (route.bucket(), route.object()),
        }
    }
}
