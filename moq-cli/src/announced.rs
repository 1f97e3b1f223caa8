//! `moqx announced URL PREFIX`

use std::io::Write;

use clap::Args;
use moqx_net::model::{Announcement, Origin, Path};
use moqx_net::session::SessionConfig;

use crate::client::{Connection, close, ended};

/// Arguments of `moqx announced`.
#[derive(Debug, Args)]
pub(crate) struct AnnouncedArgs {
    #[command(flatten)]
    connection: Connection,
    /// The prefix to follow, relative to the URL's root ("" for everything).
    #[arg(default_value = "")]
    prefix: String,
}

pub(crate) async fn run(args: AnnouncedArgs) -> Result<(), String> {
    let origin = Origin::new();
    let prefix = Path::new(&args.prefix);
    let session = args
        .connection
        .connect({
            let mut session_config = SessionConfig::default();
            session_config.subscribe = Some(origin.clone());
            session_config.subscribe_prefix = prefix.clone();
            session_config
        })
        .await?;
    let mut announced = origin.announced(prefix);
    let mut stdout = std::io::stdout();
    loop {
        tokio::select! {
            announcement = announced.next() => {
                let line = match announcement {
                    Announcement::Active { path, .. } => format!("+{path}"),
                    Announcement::Ended { path } => format!("-{path}"),
                };
                writeln!(stdout, "{line}")
                    .and_then(|()| stdout.flush())
                    .map_err(|e| format!("writing stdout: {e}"))?;
            }
            error = session.closed() => return ended(error),
            _ = tokio::signal::ctrl_c() => {
                close(&session).await;
                return Ok(());
            }
        }
    }
}
