//! `spool-relay`: a local Cloud Storage upload endpoint backed by the spool (see the
//! `relay` crate's documentation and README.md, "Services in any language").

/// mimalloc rather than the system's allocator: a relay's upload makes many small,
/// short-lived allocations on several threads (headers, the answer's JSON, the
/// upstream request); on glibc's, malloc and free were a quarter of the CPU of an
/// upload through the relay on loopback (docs/benchmarks-log.md, issue 42).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    relay::cli::main()
}
