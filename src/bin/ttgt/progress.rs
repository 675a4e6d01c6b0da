//! Progress of long commands on a terminal: a bar over a benchmark's cases with the time left,
//! or a spinner with the time spent for work of unknown length (`calibrate`). Drawn on stderr
//! only when stderr is a terminal and the output is not JSON, so piped and `--json` runs print
//! exactly what they printed before.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::CliResult;
use crate::say;

/// A bar or spinner on stderr, or nothing.
pub struct Progress(Option<ProgressBar>);

fn shown(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

impl Progress {
    /// A bar over `n` cases ("12/57 cases, 1m 3s left"); nothing when `quiet` or stderr is
    /// not a terminal.
    pub fn cases(n: usize, quiet: bool) -> Progress {
        if !shown(quiet) || n < 2 {
            return Progress(None);
        }
        let bar = ProgressBar::new(n as u64);
        if let Ok(style) = ProgressStyle::with_template(
            "{bar:30} {pos}/{len} cases, {elapsed} spent, about {eta} left  {msg}",
        ) {
            bar.set_style(style);
        }
        Progress(Some(bar))
    }

    /// A spinner with the time spent and `message`; nothing when `quiet` or stderr is not a
    /// terminal.
    pub fn spinner(message: &str, quiet: bool) -> Progress {
        if !shown(quiet) {
            return Progress(None);
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {msg}") {
            bar.set_style(style);
        }
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress(Some(bar))
    }

    /// Names the case being run.
    pub fn running(&self, case: &str) {
        if let Some(b) = &self.0 {
            b.set_message(case.to_string());
        }
    }

    /// Writes a line to stdout above the bar.
    pub fn say(&self, text: &str) -> CliResult<()> {
        match &self.0 {
            Some(b) => b.suspend(|| say(text)),
            None => say(text),
        }
    }

    /// One more case done.
    pub fn inc(&self) {
        if let Some(b) = &self.0 {
            b.inc(1);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}
