//! The fault model: a schedule of windows, each a mix of outcomes with
//! probabilities, plus a capacity model, all drawn from one seeded RNG; see
//! [`FaultPlan`].
//!
//! | file | what |
//! |---|---|
//! | `plan.rs` | [`FaultPlan`] and its parts, as data: read from TOML, checked |
//! | `engine.rs` | the plan applied to requests as they arrive: the [`Fault`] each gets, and the `Action` it takes |

mod engine;
mod plan;
#[cfg(test)]
mod tests;

pub use engine::Fault;
pub(crate) use engine::{Action, FaultEngine};
pub use plan::*;
