// The chat page: join a room, see who is there, send and receive messages through a relay.
//
// Every user publishes a broadcast named after itself with one track, "chat"; each message
// is a group of one frame stamped with its send time in microseconds (the clock of
// `nowMicros`). Users follow the room's announcements and subscribe to everyone else's
// "chat" track. Query parameters: `name`, `room`, `autojoin=1` (join at once), `relay`
// (default: the relay serving this page), `fingerprint` (default: the relay's own, from
// /certificate.sha256), `ws` (where the WebSocket fallback goes; default: the relay's host
// over `ws://` for a page served over http, whose relay likely has a self-signed
// certificate no browser takes for a WebSocket, else over `wss://`), `transport`
// (`webtransport` or `websocket` alone; default: both, raced), `no-webtransport=1` (as if
// the browser had none, like Safari: index.html deletes it before the module loads),
// `reconnect=1` (keep a session up: a new one when the relay restarts or goes away, the
// room carrying on over it), `versions` (the protocols offered, comma-separated, e.g.
// `moqt-18` for IETF moq-transport; default: the library's moq-lite versions), `log` (the
// library's log on the console, e.g. `debug`).
//
// A burst of messages can arrive out of order: moq-lite sends a newer group first (the
// latest matters most in live media), so the page places each message after the ones from
// the same sender with a lower sequence number.
//
// For tests and scripts, `window.chat` holds the state: `status` (`connected`, and
// `reconnecting` between sessions with `reconnect=1`), `connects` (sessions so far),
// `error`, `transport` and `version` (what the connection negotiated), `people`,
// `received` (every message, in that order: `{ from, group, text, latencyMs }`),
// `goingAway` (the URI of the relay's GOAWAY once it sent one: it is shutting down), and
// `send(text)`.

import load, { Connection, setLogLevel } from "./pkg/index.js";

const params = new URLSearchParams(location.search);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

const chat = {
  status: "loading",
  connects: 0,
  error: null,
  transport: null,
  version: null,
  goingAway: null,
  people: [],
  received: [],
  sent: 0,
  send,
};
window.chat = chat;

// Where `performance.now()` sits in Unix time, in milliseconds: see `nowMicros`.
let unixOffsetMs = -Infinity;

/**
 * Microseconds of Unix time at `performance.now()`'s resolution, on the clock every page and
 * every native client on this machine reads: the system's wall clock.
 *
 * `performance.timeOrigin` is not that clock: Chromium fixes each renderer process's map from
 * its monotonic clock to Unix time once, when the process starts, so two pages in two
 * processes disagree by however far the wall clock moved against the monotonic one between
 * their starts (NTP slewing, a stepped or resumed VM, a preemption between the two reads):
 * often more than a loopback message takes, which made cross-page latencies negative.
 * `Date.now()` reads the wall clock on every call but in whole milliseconds, so each call
 * takes a sample of the offset between the two clocks (`Date.now() - performance.now()`,
 * never above the true offset, since `Date.now()` rounds down) and keeps the largest since
 * the wall clock last stepped: after a few calls it is within a few microseconds of the
 * wall clock, with the monotonic clock's resolution. A sample more than a millisecond below
 * the estimate means the wall clock went back (rounding alone never takes a sample that
 * far below): start again from it.
 */
function nowMicros() {
  // The wall clock first: a sample read in this order is never above the true offset.
  const wallMs = Date.now();
  const monotonicMs = performance.now();
  const sample = wallMs - monotonicMs;
  if (sample > unixOffsetMs || sample < unixOffsetMs - 1) unixOffsetMs = sample;
  return Math.round((unixOffsetMs + monotonicMs) * 1000);
}

const $ = (id) => document.getElementById(id);
let connection = null;
let me = null;
let myName = null;

function setStatus(state, text) {
  chat.status = state;
  $("status").dataset.state = state;
  $("status").textContent = text;
}

function showError(text) {
  chat.error = text;
  $("error").hidden = false;
  $("error").textContent = text;
  setStatus("failed", "Not connected.");
}

function describe(error) {
  if (error && error.name === "MoqError") return `${error.reason} (code ${error.code})`;
  return String(error && error.message ? error.message : error);
}

/** The relay's URLs for `room`: WebTransport, the WebSocket fallback, the certificate. */
function relayUrls(room) {
  const relay = new URL(params.get("relay") ?? `https://${location.host}`);
  const certificate = `http://${relay.host}/certificate.sha256`;
  const path = encodeURIComponent(room);
  const websocket =
    params.get("ws") ?? (location.protocol === "http:" ? `ws://${relay.host}/${path}` : undefined);
  return { session: `https://${relay.host}/${path}`, websocket, certificate };
}

async function join(name, room) {
  myName = name;
  const urls = relayUrls(room);
  setStatus("connecting", `Connecting to ${urls.session} …`);
  let fingerprint = params.get("fingerprint");
  if (fingerprint === null) {
    const response = await fetch(urls.certificate);
    if (!response.ok) throw new Error(`${urls.certificate}: HTTP ${response.status}`);
    fingerprint = (await response.text()).trim();
  }
  const transport = params.get("transport");
  connection = await Connection.connect(urls.session, {
    fingerprint,
    webSocketUrl: urls.websocket,
    transports: transport ? [transport] : undefined,
    versions: params.get("versions")?.split(","),
    reconnect: params.get("reconnect") === "1",
  });
  await connection.established();
  me = connection.publish(name, "chat");
  const showConnected = () => {
    chat.transport = connection.transport;
    chat.version = connection.version;
    chat.connects = connection.connects;
    setStatus(
      "connected",
      `Connected to ${urls.session} as ${name} (${connection.version} over ${connection.transport}).`,
    );
  };
  showConnected();
  // A kept-up connection moves between sessions by itself: show where it stands.
  const watch = setInterval(() => {
    if (connection.status === "closed") return clearInterval(watch);
    if (connection.status === "reconnecting" && chat.status === "connected") {
      setStatus("reconnecting", "Lost the relay: reconnecting …");
    } else if (connection.status === "connected" && connection.connects !== chat.connects) {
      showConnected();
    }
  }, 250);
  $("join").hidden = true;
  $("room-view").hidden = false;
  addPerson(name, true);
  $("text").focus();
  // A relay that shuts down says so first (GOAWAY): tell the person, before the session
  // ends, that it is the relay going away and not their network.
  connection.goingAway().then((uri) => {
    if (uri === null || chat.status !== "connected") return;
    chat.goingAway = uri;
    $("status").textContent = "The relay is shutting down: this session ends soon.";
  });
  connection.closed().then((end) => {
    if (chat.status === "connected") showError(`The session ended: ${end.reason} (code ${end.code})`);
  });
  followRoom();
}

async function followRoom() {
  const reading = new Map();
  try {
    for await (const { path, active } of connection.announced("")) {
      if (path === myName) continue;
      if (active) {
        addPerson(path, false);
        // A subscription outlives a session lost (with `reconnect=1`): one reader a person.
        if (!reading.has(path)) {
          reading.set(path, true);
          readMessages(path).finally(() => reading.delete(path));
        }
      } else {
        removePerson(path);
      }
    }
  } catch (error) {
    showError(`Following the room: ${describe(error)}`);
  }
}

async function readMessages(from) {
  try {
    for await (const frame of connection.subscribe(from, "chat")) {
      const latencyMs = (nowMicros() - frame.timestamp) / 1000;
      // A publisher on another clock (or none: timestamp 0) gets no latency.
      const plausible = frame.timestamp > 0 && latencyMs >= 0 && latencyMs < 60_000;
      addMessage(from, frame.group, decoder.decode(frame.payload), plausible ? latencyMs : null);
    }
  } catch (error) {
    if (chat.status === "connected") console.warn(`reading ${from}:`, describe(error));
  }
}

function send(text) {
  if (!me) throw new Error("not connected");
  me.write(encoder.encode(text), nowMicros());
  chat.sent += 1;
  addMessage(myName, null, text, null);
}

function addPerson(name, mine) {
  if (chat.people.includes(name)) return;
  chat.people.push(name);
  const item = document.createElement("li");
  item.textContent = name;
  item.dataset.name = name;
  if (mine) item.classList.add("me");
  $("people").append(item);
}

function removePerson(name) {
  chat.people = chat.people.filter((person) => person !== name);
  for (const item of $("people").querySelectorAll("li")) {
    if (item.dataset.name === name) item.remove();
  }
}

/** Shows a message; `group` is its sequence number, `null` for this page's own. */
function addMessage(from, group, text, latencyMs) {
  const mine = group === null;
  const item = document.createElement("li");
  if (mine) item.classList.add("mine");
  item.dataset.from = from;
  if (!mine) item.dataset.group = group;
  const who = Object.assign(document.createElement("span"), { className: "from", textContent: from });
  const what = Object.assign(document.createElement("span"), { className: "text", textContent: text });
  const when = Object.assign(document.createElement("span"), {
    className: "latency",
    textContent: mine ? "sent" : latencyMs === null ? "" : `${latencyMs.toFixed(1)} ms`,
  });
  item.append(who, what, when);
  const list = $("messages");
  // After everything but a later message from the same sender.
  const later = mine
    ? null
    : [...list.children].find((other) => other.dataset.from === from && Number(other.dataset.group) > group);
  list.insertBefore(item, later ?? null);
  if (!mine) {
    const index = chat.received.findIndex((other) => other.from === from && other.group > group);
    const message = { from, group, text, latencyMs };
    if (index < 0) chat.received.push(message);
    else chat.received.splice(index, 0, message);
  }
  if (!later) list.scrollTop = list.scrollHeight;
}

$("join").addEventListener("submit", (event) => {
  event.preventDefault();
  join($("name").value.trim(), $("room").value.trim()).catch((error) =>
    showError(`Could not join: ${describe(error)}`),
  );
});

$("send").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("text").value;
  if (!text) return;
  try {
    send(text);
    $("text").value = "";
  } catch (error) {
    showError(`Could not send: ${describe(error)}`);
  }
});

try {
  await load();
  if (params.get("log")) setLogLevel(params.get("log"));
  $("name").value = params.get("name") ?? `guest${Math.floor(Math.random() * 1000)}`;
  $("room").value = params.get("room") ?? "lobby";
  setStatus("idle", "Not connected.");
  if (params.get("autojoin") === "1") $("join").requestSubmit();
} catch (error) {
  showError(`Could not load the MoQ module: ${describe(error)}`);
}
