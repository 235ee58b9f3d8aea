//! What a request asks of the fake, decided from its method and path alone: the
//! fake's own control API (`/_fake/`), the storage-testbench's (`/retry_test`), or
//! Cloud Storage's. The handler routes with it before anything else; the API serves
//! what it names.

use http::{Method, Uri};

use crate::control::FakeControl;
use crate::retry_test::Control;
use crate::wire::{Api, Operation, Query, Route};

/// What a request asks of the fake: its own control API, the storage-testbench's,
/// or Cloud Storage's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Fake(FakeControl),
    Control(Control),
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
            Some(Ok(control)) => Target::Control(control),
            Some(Err(not_found)) => Target::Api(not_found),
            None => Target::Api(Route::parse(method, uri, query)),
        }
    }

    pub(crate) fn operation(&self) -> Operation {
        match self {
            Target::Fake(_) => Operation::FakeControl,
            Target::Control(_) => Operation::RetryTest,
            Target::Api(route) => route.operation(),
        }
    }

    pub(crate) fn api(&self) -> Api {
        match self {
            Target::Fake(_) | Target::Control(_) => Api::Json,
            Target::Api(route) => route.api(),
        }
    }
}
