//! What a write does to an object already stored under its name: the one choice a
//! caller makes beside the name, the bytes and the attributes, kept with a spooled
//! entry so that its drain write is the write the caller asked for.
//!
//! Whatever the mode, the writes of one name reach the store in the order they were
//! made safe (acknowledged): a write of a name that still has an entry in the spool
//! is spooled behind it, the drainer sends a name's entries one at a time, oldest
//! first, and a delivered entry is never sent again in the same process (see
//! `docs/library.md`, "Overwrites and order").

/// How a write treats an object the store already holds under its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WriteMode {
    /// Written only if no object has the name (Cloud Storage's
    /// `ifGenerationMatch=0`, `object_store`'s `PutMode::Create`). A write answered
    /// "already exists" counts as stored when the object there is proven to hold
    /// these bytes (an earlier try landed), and is refused otherwise. The default:
    /// what every write was before overwrites.
    #[default]
    CreateIfAbsent,
    /// Replaces whatever the name holds (a write with no precondition,
    /// `PutMode::Overwrite`).
    Overwrite,
}

impl WriteMode {
    /// The `object_store` put mode of a write in this mode.
    pub fn put_mode(self) -> object_store::PutMode {
        match self {
            WriteMode::CreateIfAbsent => object_store::PutMode::Create,
            WriteMode::Overwrite => object_store::PutMode::Overwrite,
        }
    }

    /// The label metrics and logs use: `create_if_absent` or `overwrite`.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteMode::CreateIfAbsent => "create_if_absent",
            WriteMode::Overwrite => "overwrite",
        }
    }
}

impl std::fmt::Display for WriteMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
