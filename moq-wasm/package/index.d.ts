// The types of moqx-wasm: MoQ (moq-lite) publish and subscribe through a relay, from a
// browser. Nothing here is `any`: frames, announcements, stats and errors are typed.

/** Every failure of the library: moq-lite's wire `code` and what happened. */
export class MoqError extends Error {
  constructor(code: number, reason: string);
  readonly name: "MoqError";
  /** moq-lite's wire code: 0 cancel, 1 internal, 4 transport, 6 unauthorized, … */
  readonly code: number;
  /** What happened. */
  readonly reason: string;
}

/** A moq-lite version. */
export type Version = "moq-lite-05" | "moq-lite-04" | "moq-lite-03" | "moq-lite-06-wip";

/** What a connection runs over. */
export type Transport = "webtransport" | "websocket";

/** How to connect. Every field is optional. */
export interface ConnectOptions {
  /** The SHA-256 of the relay's certificate (hex, colons allowed), pinned for WebTransport:
   * how a page trusts a relay's self-signed certificate. */
  fingerprint?: string;
  /** The versions offered, in order of preference [default: 05, 04, 03]. */
  versions?: Version[];
  /** The transports tried, raced [default: both; WebTransport is skipped where it is
   * missing or known broken]. */
  transports?: Transport[];
  /** Where the WebSocket goes [default: the URL's host, port and path over `wss://`]. */
  webSocketUrl?: string;
  /** How long WebTransport goes alone before the WebSocket starts [default: 500; 0 once
   * the WebSocket has won for the URL]. */
  headStartMs?: number;
  /** How long connecting may take, until the session is established [default: 10000]. */
  timeoutMs?: number;
  /** Keep a session up once the first is: make a new one when it ends or its relay goes
   * away (to the URL a GOAWAY names, else the URL and then each of `alternateUrls`),
   * backing off from 1 s to 10 s between failures; publications and subscriptions carry
   * on over it [default: false]. */
  reconnect?: boolean;
  /** More relays to reconnect to, in turn after the URL (with `reconnect`). */
  alternateUrls?: string[];
}

/** Where a connection stands: a kept-up (`reconnect`) one is `"reconnecting"` between
 * sessions. */
export type ConnectionStatus = "connected" | "reconnecting" | "closed";

/** One frame of a subscribed track. */
export interface Frame {
  /** The bytes. */
  readonly payload: Uint8Array;
  /** The publisher's timestamp, in the track's timescale (microseconds for pages). */
  readonly timestamp: number;
  /** The sequence number of the frame's group. */
  readonly group: number;
}

/** A broadcast appearing (`active`) or going away under an `announced` prefix. */
export interface Announcement {
  /** Its path, relative to the connection's root. */
  readonly path: string;
  readonly active: boolean;
}

/** A connection's counters. */
export interface Stats {
  /** The round-trip time, once measured. */
  readonly rttMs: number | undefined;
  readonly bytesSent: number;
  readonly bytesReceived: number;
  readonly packetsLost: number;
}

/** How a session ended. */
export interface Closed {
  readonly code: number;
  readonly reason: string;
}

/** A moq-lite session with a relay. */
export class Connection {
  private constructor();
  /** Connects to `url` (`https://host:port/root`, or `ws://`/`wss://` for a WebSocket
   * alone); the second argument is a fingerprint or the options. Rejects with a
   * `MoqError` (code 4) if no session could be set up; throws a `RangeError` for a bad
   * option. Needs the module loaded: `connect()` does that first. */
  static connect(url: string, options?: string | ConnectOptions | null): Promise<Connection>;
  /** The URL it connected to. */
  readonly url: string;
  /** The version the relay chose (the last session's while reconnecting). */
  readonly version: Version;
  /** What it runs over (the last session's while reconnecting). */
  readonly transport: Transport;
  /** Where it stands now. */
  readonly status: ConnectionStatus;
  /** Sessions established so far: 1, more once it has reconnected. */
  readonly connects: number;
  /** Resolves once both sides exchanged SETUP (with `reconnect`: once a session is up);
   * rejects with a `MoqError`. */
  established(): Promise<void>;
  /** Publishes a broadcast at `path` with one track `track`. Throws a `MoqError`
   * (duplicate) if this connection already publishes `path`. */
  publish(path: string, track: string): Publisher;
  /** The frames of `track` of the broadcast at `path`, once it is announced; ends with the
   * track, rejects with a `MoqError` (with `reconnect`, a session lost does not end it). */
  subscribe(path: string, track: string): AsyncIterableIterator<Frame>;
  /** The broadcasts under `prefix` (`""` for all) as they come and go. */
  announced(prefix: string): AsyncIterableIterator<Announcement>;
  /** Closes the session (code 0) and stops reconnecting. Idempotent. */
  close(): void;
  /** Resolves once the session ended (with `reconnect`: once closed). */
  closed(): Promise<Closed>;
  /** Resolves with the URI the relay names when it says it is going away (`""`: the same
   * place, later), or `null` if the session ended first. */
  goingAway(): Promise<string | null>;
  /** The connection's counters now. */
  stats(): Stats;
  /** Frees the object (the session goes on until closed). */
  free(): void;
}

/** A broadcast this page publishes, with one track: each `write` is a group of one frame. */
export class Publisher {
  private constructor();
  /** Sends `payload` as the next group, stamped `timestamp` (microseconds; default 0);
   * returns the group's sequence number. */
  write(payload: Uint8Array, timestamp?: number): number;
  /** The broadcast's path. */
  readonly path: string;
  /** Ends the track and withdraws the broadcast. Idempotent. */
  close(): void;
  free(): void;
}

/** Shows the library's log on the console: `"error"` … `"trace"`, or per target
 * (`"moqx_net=debug"`). The first call sets it. */
export function setLogLevel(filter: string): void;

/** What the wasm module can be loaded from. */
export type ModuleSource = string | URL | Request | Response | BufferSource | WebAssembly.Module;

/** Loads the wasm module once (from beside the package's files unless `module` says). */
export function load(module?: ModuleSource): Promise<void>;

/** Loads the module if needed, then connects (see `Connection.connect`). */
export function connect(url: string, options?: string | ConnectOptions | null): Promise<Connection>;

export default load;
