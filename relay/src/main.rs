//! `spool-relay`: a local Cloud Storage upload endpoint backed by the spool (see the
//! `relay` crate's documentation and README.md, "Services in any language").

fn main() -> std::process::ExitCode {
    relay::cli::main()
}
