# Everyday recipes. Each one calls the same xtask command CI uses, so `just` is optional:
# `cargo xtask <command>` does the same thing.

# The main job: a relay on loopback, a room of chat users through it, a summary.
demo:
    cargo xtask demo

# Everything CI runs: prerequisites, fmt, dependency direction, clippy, tests, loom, docs.
test:
    cargo xtask test

# The fast static checks: fmt, dependency direction, clippy, docs.
check:
    cargo xtask check

# The loom models of kio's concurrency protocols.
loom:
    cargo xtask loom

# Wall-clock benchmarks, instruction counts under callgrind (the micro-benchmarks, then the
# cost meter's relay instructions per delivery), then moq-bench's every
# profile against the relay (table, JSON lines and an SVG chart in target/moq-bench).
bench:
    cargo xtask bench
    cargo xtask bench --instructions
    cargo xtask suite

# The chat page: builds moqx-wasm and serves the page from a relay on 127.0.0.1:4443.
web:
    cargo xtask web

# The browser tests: the chat page in headless Chromium against the relay.
browser:
    cargo xtask browser
