// Send-to-receive latency through a relay, measured inside one page: a publishing
// connection sends `n` messages at `rate` per second, a second connection of the same page
// subscribes to them, and each arrival is timed against its send on the page's one clock
// (`performance.now()`). Query parameters: `n`, `rate`, `room`, `relay` and `fingerprint`
// as for the chat page, and `transport` (`webtransport` or `websocket`: that one alone;
// the WebSocket goes to the relay's host over `ws://`). The result lands in
// `window.bench`: `{ status, error, transport, sent, latenciesMs }` (`status` "done" when
// finished).

import load, { Connection } from "./pkg/index.js";

const params = new URLSearchParams(location.search);
const count = Number(params.get("n") ?? 1000);
const rate = Number(params.get("rate") ?? 100);
const room = params.get("room") ?? "bench";
const bench = {
  status: "loading",
  error: null,
  transport: null,
  sent: 0,
  warmups: 0,
  latenciesMs: [],
};
window.bench = bench;

const micros = () => Math.round(performance.now() * 1000);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const status = (text) => (document.getElementById("status").textContent = text);

async function run() {
  await load();
  const relay = new URL(params.get("relay") ?? `https://${location.host}`);
  let fingerprint = params.get("fingerprint");
  if (fingerprint === null) {
    fingerprint = (await (await fetch(`http://${relay.host}/certificate.sha256`)).text()).trim();
  }
  const url = `https://${relay.host}/${encodeURIComponent(room)}`;
  const transport = params.get("transport");
  const options = {
    fingerprint,
    transports: transport ? [transport] : undefined,
    webSocketUrl: `ws://${relay.host}/${encodeURIComponent(room)}`,
  };
  const sender = await Connection.connect(url, options);
  const receiver = await Connection.connect(url, options);
  bench.transport = sender.transport;
  await Promise.all([sender.established(), receiver.established()]);
  const track = sender.publish("page", "chat");

  let measuring = false;
  let firstArrival = null;
  const arrived = new Promise((resolve) => (firstArrival = resolve));
  const reading = (async () => {
    for await (const frame of receiver.subscribe("page", "chat")) {
      const latency = (micros() - frame.timestamp) / 1000;
      firstArrival();
      if (measuring) bench.latenciesMs.push(latency);
      if (bench.latenciesMs.length >= count) return;
    }
  })();

  // Warm up until the subscription is up (a late subscriber starts at the latest message).
  bench.status = "warming up";
  status("Warming up…");
  let up = false;
  arrived.then(() => (up = true));
  while (!up) {
    track.write(new Uint8Array([0]), micros());
    bench.warmups += 1;
    await sleep(50);
  }
  await sleep(200); // the last warm-ups land before measuring starts
  measuring = true;
  bench.status = "sending";
  status(`Sending ${count} messages at ${rate}/s…`);
  const payload = new TextEncoder().encode("a chat message of about sixty bytes, like the benchmarks");
  const interval = 1000 / rate;
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const due = start + i * interval;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    track.write(payload, micros());
    bench.sent += 1;
  }
  await reading;
  bench.status = "done";
  const sorted = [...bench.latenciesMs].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
  document.getElementById("result").textContent =
    `${sorted.length} messages: p50 ${at(0.5).toFixed(2)} ms, p99 ${at(0.99).toFixed(2)} ms`;
  status("Done.");
  sender.close();
  receiver.close();
}

run().catch((error) => {
  bench.status = "failed";
  bench.error = String(error && error.reason ? `${error.reason} (code ${error.code})` : error);
  status(`Failed: ${bench.error}`);
});
