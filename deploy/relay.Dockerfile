# spool-relay as an image, for the Kubernetes sidecar (deploy/kubernetes/README.md).
#
#   docker build -f deploy/relay.Dockerfile -t REGISTRY/spool-relay:TAG .
#
# The build context is the repository (.dockerignore leaves out target/, .git and
# reports/). Not built by CI (no Docker daemon there); the binary it holds is the
# one CI builds and tests (`cargo build --release -p relay --bin spool-relay`).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p relay --bin spool-relay

FROM debian:bookworm-slim
# ca-certificates: the upstream is Cloud Storage over TLS.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/spool-relay /usr/local/bin/spool-relay
# Not root: the Pod's securityContext runs it as 65532 too, with a read-only root
# file system; the spool is a volume (--dir).
USER 65532:65532
# 4443: the Cloud Storage API (--listen); 9464: metrics, /healthz and /readyz (--metrics).
EXPOSE 4443 9464
ENTRYPOINT ["/usr/local/bin/spool-relay"]
