//! Send-to-receive latency through the relay, from a page in headless Chromium and from a
//! native client, side by side in one run against one relay.
//!
//! The page (`moq-wasm/web/bench.html`) sends `--messages` messages at `--rate` per second
//! from one connection to a second connection of its own, timing each on its one clock,
//! once over WebTransport and once over a WebSocket (QMux), one after the other (in the
//! order `--transports webtransport,websocket` gives); meanwhile the native chat example
//! runs two users through the same relay, each sending the same number at the same rate
//! and timing each delivery (it overlaps the first page's run). It prints the latency distributions (p50, p99)
//! as a table and a JSON line.
//!
//! ```text
//! cargo xtask web            # builds target/web (or: cargo xtask browser)
//! MOQ_WEB_ROOT=target/web cargo run --release -p moq-conformance --features browser \
//!     --bin browser-latency -- --messages 1000 --rate 50
//! ```
//!
//! A benchmark, not a test: it prints figures and asserts nothing about them.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::{Command, Stdio};

use moq_conformance::browser::{Chromium, Relay, quantile, web_root, workspace_binary};
use serde_json::{Value, json};

struct Args {
    messages: u64,
    rate: f64,
    /// The page's transports, measured one after the other in this order.
    transports: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        messages: 1000,
        rate: 50.0,
        transports: vec!["webtransport".into(), "websocket".into()],
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let value = given
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--messages" => args.messages = value.parse().map_err(|_| "--messages: a count")?,
            "--rate" => args.rate = value.parse().map_err(|_| "--rate: messages per second")?,
            "--transports" => {
                args.transports = value.split(',').map(str::to_owned).collect();
                if let Some(bad) = args
                    .transports
                    .iter()
                    .find(|t| !["webtransport", "websocket"].contains(&t.as_str()))
                {
                    return Err(format!(
                        "--transports: {bad:?} is not webtransport or websocket"
                    ));
                }
            }
            other => {
                return Err(format!(
                    "unknown flag {other} (--messages N, --rate R, --transports LIST)"
                ));
            }
        }
    }
    if args.messages == 0 || args.rate <= 0.0 {
        return Err("--messages and --rate must be above zero".into());
    }
    Ok(args)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("browser-latency: {message}");
            std::process::exit(2);
        }
    };
    let relay_binary = workspace_binary("moqx-relay", "moqx-relay", false, true);
    let chat_binary = workspace_binary("moq-examples", "chat", true, true);
    let relay = Relay::start(&relay_binary, &web_root());
    let chromium = Chromium::start();

    let native = Command::new(&chat_binary)
        .args(["--fingerprint", relay.fingerprint()])
        .arg(relay.moqt_url("native"))
        .args(["--users", "2", "--messages", &args.messages.to_string()])
        .args(["--rate", &args.rate.to_string(), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the chat example runs");
    let mut pages = Vec::new();
    for transport in &args.transports {
        pages.push((
            transport.as_str(),
            page_latencies(&chromium, &relay, &args, transport).await,
        ));
    }
    let output = native.wait_with_output().expect("the chat example ends");
    assert!(output.status.success(), "the chat example failed");
    let native: Value =
        serde_json::from_slice(&output.stdout).expect("the chat example prints JSON");
    let native_p50 = native["latency_ms"]["p50"].as_f64().unwrap_or(f64::NAN);
    let native_p99 = native["latency_ms"]["p99"].as_f64().unwrap_or(f64::NAN);
    let native_count = native["delivered"].as_u64().unwrap_or(0);

    println!(
        "send-to-receive latency through one relay, {} messages at {}/s each:",
        args.messages, args.rate
    );
    println!("| client | deliveries | p50 (ms) | p99 (ms) |");
    println!("|---|---:|---:|---:|");
    let mut page_json = serde_json::Map::new();
    for (transport, page_ms) in &pages {
        let (p50, p99) = (quantile(page_ms, 0.5), quantile(page_ms, 0.99));
        println!(
            "| page (Chromium, moqx-wasm) over {transport} | {} | {p50:.2} | {p99:.2} |",
            page_ms.len()
        );
        page_json.insert(
            (*transport).to_owned(),
            json!({ "deliveries": page_ms.len(), "p50_ms": p50, "p99_ms": p99 }),
        );
    }
    println!(
        "| native (chat example, moqx-tokio) | {native_count} | {native_p50:.2} | {native_p99:.2} |"
    );
    println!(
        "{}",
        json!({
            "messages": args.messages,
            "rate": args.rate,
            "page": page_json,
            "native": { "deliveries": native_count, "p50_ms": native_p50, "p99_ms": native_p99 },
        })
    );
}

/// The page's send-to-receive latencies over `transport` alone, sorted.
async fn page_latencies(
    chromium: &Chromium,
    relay: &Relay,
    args: &Args,
    transport: &str,
) -> Vec<f64> {
    let page = chromium
        .open(&relay.http_url(&format!(
            "/bench.html?n={}&rate={}&room=page-{transport}&transport={transport}",
            args.messages, args.rate
        )))
        .await;
    let deadline = std::time::Instant::now()
        + std::time::Duration::from_secs_f64(args.messages as f64 / args.rate + 120.0);
    let bench = loop {
        let bench = page
            .eval("window.bench ? JSON.parse(JSON.stringify(window.bench)) : null")
            .await;
        if bench["status"] == "done" || bench["status"] == "failed" {
            break bench;
        }
        if std::time::Instant::now() >= deadline {
            let text = page.eval("document.body.innerText").await;
            panic!("the page did not finish: {bench:#}; it shows {text}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(bench["status"], "done", "the page failed: {bench:#}");
    assert_eq!(
        bench["transport"], transport,
        "the page connected over another transport"
    );
    page.close().await;
    let mut page_ms: Vec<f64> = bench["latenciesMs"]
        .as_array()
        .expect("latencies")
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    page_ms.sort_by(f64::total_cmp);
    page_ms
}
