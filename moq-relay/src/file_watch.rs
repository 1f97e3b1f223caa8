//! Changes to files the relay rereads while it runs (its certificate, its token keys), seen
//! through their directories: a file rewritten in place, a new one renamed over it (certbot,
//! cert-manager) and a Kubernetes secret's symlink swap (`..data`) all show there, where a
//! watch of the file itself would lose the renamed-over inode. The `notify` crate (inotify
//! on Linux) does the watching.

use std::path::Path;
use std::time::Duration;

use notify::Watcher;

/// How long after a change the files are read: a renewal writes the chain and the key (or a
/// key set) one after the other.
const SETTLE: Duration = Duration::from_millis(250);

/// A watch of the directories of some files.
pub(crate) struct FileWatch {
    /// Kept for as long as the watch lasts.
    _watcher: notify::RecommendedWatcher,
    changes: tokio::sync::mpsc::UnboundedReceiver<()>,
}

impl FileWatch {
    /// Watches the directories of `files` (`what` names them in the warnings). `None` if no
    /// directory can be watched; SIGHUP still rereads the files then.
    pub(crate) fn new(files: &[&Path], what: &str) -> Option<Self> {
        let (events, changes) = tokio::sync::mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            if event.is_ok() {
                let _ = events.send(());
            }
        });
        let mut watcher = match watcher {
            Ok(watcher) => watcher,
            Err(error) => {
                tracing::warn!(%error, "cannot watch {what}; SIGHUP rereads it");
                return None;
            }
        };
        let mut directories: Vec<&Path> = files.iter().map(|file| parent(file)).collect();
        directories.sort();
        directories.dedup();
        let mut watching = false;
        for directory in directories {
            match watcher.watch(directory, notify::RecursiveMode::NonRecursive) {
                Ok(()) => watching = true,
                Err(error) => {
                    tracing::warn!(%error, directory = %directory.display(), "cannot watch {what}'s directory; SIGHUP rereads it");
                }
            }
        }
        watching.then_some(Self {
            _watcher: watcher,
            changes,
        })
    }

    /// Waits for the next change, and for the writes that came with it to settle; `None`
    /// once the watch has ended.
    pub(crate) async fn changed(&mut self) -> Option<()> {
        self.changes.recv().await?;
        tokio::time::sleep(SETTLE).await;
        while self.changes.try_recv().is_ok() {}
        Some(())
    }
}

/// The directory a file's changes show in.
fn parent(file: &Path) -> &Path {
    match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_file_name_is_watched_in_the_working_directory() {
        assert_eq!(parent(Path::new("cert.pem")), Path::new("."));
        assert_eq!(
            parent(Path::new("/etc/moq/cert.pem")),
            Path::new("/etc/moq")
        );
    }
}
