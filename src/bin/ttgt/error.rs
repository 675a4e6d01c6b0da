//! The CLI's error: one printable line.

use std::fmt;

/// A user-facing error, printed as `ttgt: error: <message>` (exit status 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CliError(String);

/// Result alias of the CLI.
pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// An error with this message (newlines are folded so that it prints as one line).
    pub fn new(message: impl Into<String>) -> Self {
        let message: String = message.into();
        let one_line: Vec<&str> = message
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        CliError(one_line.join("; "))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<ttgt::Error> for CliError {
    fn from(e: ttgt::Error) -> Self {
        CliError::new(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_lines() {
        assert_eq!(CliError::new("a\n  b\n\n").to_string(), "a; b");
    }
}
