//! Running child processes with a legible failure.

use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::process::Output;

/// Why a step failed, in words for the person reading CI output.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A command to run, shown as it will run.
pub(crate) struct Command {
    inner: std::process::Command,
    display: String,
}

impl Command {
    pub(crate) fn new(program: impl Into<OsString>, args: &[&str]) -> Self {
        let program = program.into();
        let display = std::iter::once(program.to_string_lossy().into_owned())
            .chain(args.iter().map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        let mut inner = std::process::Command::new(program);
        inner.args(args);
        Self { inner, display }
    }

    pub(crate) fn current_dir(mut self, dir: &Path) -> Self {
        self.inner.current_dir(dir);
        self
    }

    pub(crate) fn env(mut self, key: &str, value: &str) -> Self {
        self.display = format!("{key}={value:?} {}", self.display);
        self.inner.env(key, value);
        self
    }

    /// Runs with stdout and stderr going to `log`; returns whether it exited with success
    /// (a command that cannot start is a [`Failure`]).
    pub(crate) fn output_to(mut self, log: &Path) -> Result<bool, Failure> {
        println!("$ {} > {}", self.display, log.display());
        let file = std::fs::File::create(log)
            .map_err(|e| Failure(format!("creating {}: {e}", log.display())))?;
        let copy = file
            .try_clone()
            .map_err(|e| Failure(format!("opening {}: {e}", log.display())))?;
        let status = self
            .inner
            .stdout(copy)
            .stderr(file)
            .status()
            .map_err(|e| Failure(format!("could not start `{}`: {e}", self.display)))?;
        Ok(status.success())
    }

    /// Runs with inherited stdio; a non-zero exit is a [`Failure`] naming the command.
    pub(crate) fn run(mut self) -> Result<(), Failure> {
        println!("$ {}", self.display);
        let status = self
            .inner
            .status()
            .map_err(|e| Failure(format!("could not start `{}`: {e}", self.display)))?;
        if status.success() {
            Ok(())
        } else {
            Err(Failure(format!("`{}` exited with {status}", self.display)))
        }
    }

    /// Runs capturing stdout and stderr; a non-zero exit is a [`Failure`] with stderr.
    pub(crate) fn output(mut self) -> Result<Output, Failure> {
        let output = self
            .inner
            .output()
            .map_err(|e| Failure(format!("could not start `{}`: {e}", self.display)))?;
        if output.status.success() {
            Ok(output)
        } else {
            Err(Failure(format!(
                "`{}` exited with {}:\n{}",
                self.display,
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )))
        }
    }
}

/// `cargo ARGS` in `root`, with the cargo that runs the xtask.
pub(crate) fn cargo(root: &Path, args: &[&str]) -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(program, args).current_dir(root)
}
