# The relay as a container image: `docker build -t moqx-relay .`, then
#
#   docker run --rm -p 4443:4443/udp -p 4443:4443/tcp moqx-relay
#
# Built in two stages: the first compiles a release `moqx-relay` (quiche's BoringSSL needs
# cmake, clang and git), the second is Debian slim with the binary, run as an unprivileged user.
# The base images are arguments, for builders that use a mirror.
# Set the UDP buffer sysctls on the host (they are not per container): README, "Operating
# the relay".
ARG BUILDER=docker.io/library/rust:1-bookworm
ARG RUNTIME=docker.io/library/debian:bookworm-slim

FROM ${BUILDER} AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake clang libclang-dev git \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The commit `moq_relay_build_info` reports (the build context has no .git).
ARG MOQ_BUILD_COMMIT=unknown
ENV MOQ_BUILD_COMMIT=${MOQ_BUILD_COMMIT}
RUN cargo build --release --locked -p moqx-relay \
    && cp target/release/moqx-relay /moqx-relay \
    && strip /moqx-relay

FROM ${RUNTIME}
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin moq
COPY --from=build /moqx-relay /usr/local/bin/moqx-relay
COPY packaging/docker/relay.toml /etc/moqx-relay/relay.toml
USER moq
# Raw QUIC and WebTransport (UDP), WebSocket and TLS clients (TCP), the ops listener.
EXPOSE 4443/udp 4443/tcp 9090/tcp
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s \
    CMD ["/usr/local/bin/moqx-relay", "health", "127.0.0.1:9090"]
# SIGTERM drains (GOAWAY, then shutdown.drain_secs): give `docker stop` longer than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/moqx-relay"]
CMD ["--config", "/etc/moqx-relay/relay.toml"]
