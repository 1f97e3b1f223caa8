//! The two tools a QUIC engineer reaches for first when a client misbehaves: a qlog of each
//! connection (quiche's, JSON-SEQ, for qvis and the like) and a TLS key log
//! (`SSLKEYLOGFILE`'s format, for Wireshark to decrypt a capture). Both are off unless
//! asked for; neither touches a connection that is not traced.
//!
//! The qlogs are bounded: at most `max_files` in the directory from this process (the
//! oldest deleted to make room for the newest, so a relay left tracing keeps the latest
//! connections), each cut at `max_file_bytes`.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where a server's connections are traced.
#[derive(Debug, Clone, Default)]
pub struct QuicTrace {
    /// One qlog per connection, in a directory.
    pub qlog: Option<Arc<QlogDir>>,
    /// Every connection's TLS secrets, in one file.
    pub keylog: Option<KeyLog>,
}

impl QuicTrace {
    /// Whether anything is traced.
    pub fn is_enabled(&self) -> bool {
        self.qlog.is_some() || self.keylog.is_some()
    }

    /// Starts tracing `conn` (a new connection; `role` is `"server"` or `"client"`).
    pub(crate) fn attach(&self, conn: &mut quiche::Connection, role: &str) {
        if let Some(keylog) = &self.keylog {
            conn.set_keylog(Box::new(keylog.clone()));
        }
        if let Some(qlog) = &self.qlog {
            let id = conn.trace_id().to_owned();
            match qlog.create(&id, role) {
                Ok(file) => conn.set_qlog(
                    Box::new(file),
                    format!("moq {role} {id}"),
                    format!("a {role} connection of moqx-runtime"),
                ),
                Err(error) => tracing::warn!(%error, "cannot create a qlog file"),
            }
        }
    }
}

/// A directory of qlog files, bounded in count and size.
#[derive(Debug)]
pub struct QlogDir {
    dir: PathBuf,
    max_files: usize,
    max_file_bytes: u64,
    /// The files written, oldest first.
    files: Mutex<VecDeque<PathBuf>>,
}

impl QlogDir {
    /// Writes into `dir` (created if missing), at most `max_files` files of at most
    /// `max_file_bytes` each.
    pub fn new(dir: &Path, max_files: usize, max_file_bytes: u64) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self {
            dir: dir.to_owned(),
            max_files: max_files.max(1),
            max_file_bytes,
            files: Mutex::new(VecDeque::new()),
        })
    }

    /// A new file for the connection `id`, deleting the oldest past the count.
    fn create(&self, id: &str, role: &str) -> io::Result<Capped> {
        let name: String = id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path = self.dir.join(format!("{role}-{name}.sqlog"));
        let file = File::create(&path)?;
        let mut files = self
            .files
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        files.push_back(path);
        while files.len() > self.max_files {
            if let Some(oldest) = files.pop_front() {
                let _ = std::fs::remove_file(oldest);
            }
        }
        Ok(Capped {
            file: io::BufWriter::new(file),
            left: self.max_file_bytes,
        })
    }
}

/// A file that takes at most so many bytes, then silently drops the rest.
struct Capped {
    file: io::BufWriter<File>,
    left: u64,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let take = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        if take > 0 {
            self.file.write_all(&buf[..take])?;
            self.left -= take as u64;
        }
        // The rest is dropped, as if written: quiche must not fail a connection over it.
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// A key log file (NSS format) shared by every connection.
#[derive(Debug, Clone)]
pub struct KeyLog {
    file: Arc<Mutex<File>>,
}

impl KeyLog {
    /// Appends to `path` (created with owner-only permissions: it decrypts traffic).
    pub fn open(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        Ok(Self {
            file: Arc::new(Mutex::new(file)),
        })
    }
}

impl Write for KeyLog {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // One line per call from BoringSSL: written whole, under the lock.
        self.file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qlog_files_are_capped_in_size_and_count() {
        let dir = tempfile::tempdir().unwrap();
        let qlogs = QlogDir::new(&dir.path().join("qlog"), 2, 10).unwrap();
        for id in ["a", "b", "c"] {
            let mut file = qlogs.create(id, "server").unwrap();
            assert_eq!(
                file.write(&[b'x'; 25]).unwrap(),
                25,
                "the rest dropped as written"
            );
            file.flush().unwrap();
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("qlog"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["server-b.sqlog", "server-c.sqlog"]);
        let text = std::fs::read(dir.path().join("qlog/server-c.sqlog")).unwrap();
        assert_eq!(text.len(), 10);
    }
}
