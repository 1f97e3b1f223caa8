//! Where the relay's token keys come from while it runs, besides a SIGHUP: the key file,
//! watched like the certificate files (its directory, so renames and symlink swaps count),
//! or a JWK Set at a URL (`auth.key_url`, an identity provider's JWKS endpoint), fetched at
//! start and every `auth.key_refresh_secs`. A set that does not load is logged and the keys
//! in force stay.

use std::path::PathBuf;
use std::time::Duration;

use crate::file_watch::FileWatch;
use crate::jwks_fetch::fetch;
use crate::reload::RelayHandle;

/// Keeps the keys current: watches `auth.key`'s directory, or fetches `auth.key_url`
/// every `auth.key_refresh_secs`, whichever the configuration in force names (a reload may
/// change it). Ends when aborted.
pub(crate) async fn follow(handle: RelayHandle) {
    loop {
        let auth = handle.config().auth;
        let mut reloads = handle.reloads();
        match (auth.key, auth.key_url) {
            (Some(path), _) => {
                tokio::select! {
                    () = watch_file(&handle, path) => {}
                    _ = reloads.changed() => {}
                }
            }
            (None, Some(url)) => {
                let every = Duration::from_secs(auth.key_refresh_secs);
                tokio::select! {
                    () = tokio::time::sleep(every) => refresh_url(&handle, &url).await,
                    // A reload with a URL fetches at once (it may be a new one).
                    _ = reloads.changed() => refresh_url(&handle, &url).await,
                }
            }
            (None, None) => {
                let _ = reloads.changed().await;
            }
        }
    }
}

/// Fetches `url` and puts its keys in force if they load.
pub(crate) async fn refresh_url(handle: &RelayHandle, url: &str) {
    match fetch(url).await {
        Ok(text) => handle.set_fetched_keys(text),
        Err(error) => {
            tracing::warn!(%error, "fetching auth.key_url; the keys in force stay");
        }
    }
}

/// Rereads the keys after each change of the file at `path`, until the watch ends.
async fn watch_file(handle: &RelayHandle, path: PathBuf) {
    let Some(mut watch) = FileWatch::new(&[&path], "the key file") else {
        return std::future::pending().await;
    };
    // Only a change of the file itself counts (the directory may hold the certificate).
    let mut last = std::fs::read(&path).ok();
    while watch.changed().await.is_some() {
        let now = std::fs::read(&path).ok();
        if now != last {
            last = now;
            handle.refresh_keys();
        }
    }
}
