// A consumer of the package's types, compiled with `tsc --strict --noImplicitAny` in CI
// (`cargo xtask types`): every use here must type-check, and every `@ts-expect-error`
// line must fail to, or the build fails.

import load, { connect, Connection, MoqError, setLogLevel } from "../index.js";
import type {
  Announcement,
  ConnectionStatus,
  ConnectOptions,
  Frame,
  Stats,
  Transport,
  Version,
} from "../index.js";

async function chat(): Promise<void> {
  await load();
  setLogLevel("warn");
  const options: ConnectOptions = {
    fingerprint: "00".repeat(32),
    versions: ["moq-lite-05", "moq-lite-04"],
    transports: ["webtransport", "websocket"],
    webSocketUrl: "ws://127.0.0.1:4443/room",
    headStartMs: 500,
    timeoutMs: 10_000,
    reconnect: true,
    alternateUrls: ["https://backup.example/room"],
  };
  const connection: Connection = await connect("https://127.0.0.1:4443/room", options);
  const again: Connection = await Connection.connect("wss://relay.example/room", "ab:cd");
  const transport: Transport = connection.transport;
  const version: Version = again.version;
  const status: ConnectionStatus = connection.status;
  const connects: number = connection.connects;
  console.log(status === "reconnecting" ? "between sessions" : status, connects);
  await connection.established();
  const me = connection.publish("alice", "chat");
  const group: number = me.write(new TextEncoder().encode("hello"), Date.now() * 1000);
  for await (const frame of connection.subscribe("bob", "chat")) {
    const checked: Frame = frame;
    const text: string = new TextDecoder().decode(checked.payload);
    const at: number = checked.timestamp + checked.group + group;
    console.log(text, at, transport, version);
  }
  for await (const announcement of connection.announced("")) {
    const seen: Announcement = announcement;
    const line: string = `${seen.path} ${seen.active ? "here" : "gone"}`;
    console.log(line);
  }
  const stats: Stats = connection.stats();
  const rtt: number = stats.rttMs ?? -1;
  const ended = await connection.closed();
  const summary: string = `${ended.code} ${ended.reason} ${rtt} ${stats.bytesSent}`;
  const away: string | null = await connection.goingAway();
  console.log(summary, away);
  me.close();
  connection.close();
}

chat().catch((error: unknown) => {
  if (error instanceof MoqError) {
    const code: number = error.code;
    const reason: string = error.reason;
    console.error(code, reason);
  }
});

async function misuses(connection: Connection): Promise<void> {
  // @ts-expect-error: not a transport
  await connect("https://x/", { transports: ["quic"] });
  // @ts-expect-error: not a version
  await connect("https://x/", { versions: ["moq-lite-99"] });
  // @ts-expect-error: reconnect is a flag
  await connect("https://x/", { reconnect: "yes" });
  // @ts-expect-error: not a status
  const lost: ConnectionStatus = "lost";
  void lost;
  // @ts-expect-error: a payload is bytes, not text
  connection.publish("a", "b").write("text");
  for await (const frame of connection.subscribe("a", "b")) {
    // @ts-expect-error: frames have no `data`
    console.log(frame.data);
  }
}
void misuses;
