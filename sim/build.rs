//! Refuses to build the bench without `--cfg tokio_unstable`.
//!
//! turmoil seeds tokio's `select!` branch choice only when tokio is built with
//! `--cfg tokio_unstable`; without it `select!` draws from the OS, and the same
//! scenario and seed no longer give the same report. The workspace's
//! `.cargo/config.toml` sets the flag, but a `RUSTFLAGS` of the user's own (or
//! `cargo install` run outside the workspace) replaces that setting without a word,
//! so the build checks it here, before anything of the bench compiles.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
    println!("cargo::rerun-if-env-changed=RUSTFLAGS");
    println!("cargo::rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    if std::env::var_os("CARGO_CFG_TOKIO_UNSTABLE").is_none() {
        eprintln!(
            "error: the sim bench must be built with `--cfg tokio_unstable`, or its runs are \
             not reproducible.\n\
             \n\
             turmoil makes tokio's `select!` deterministic only with that flag. The \
             workspace's .cargo/config.toml sets it, but RUSTFLAGS (or \
             CARGO_ENCODED_RUSTFLAGS, or a build outside the workspace such as \
             `cargo install --path sim` from another directory) replaced it.\n\
             \n\
             Fix: unset RUSTFLAGS, or add the flag to yours:\n    \
             RUSTFLAGS=\"$RUSTFLAGS --cfg tokio_unstable\" cargo run -p sim -- scenarios/us-central1.toml"
        );
        std::process::exit(1);
    }
}
