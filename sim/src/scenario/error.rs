//! Where a scenario is wrong: the file, the line (looked up in the TOML's spans)
//! and the field, with what is wrong.

/// A scenario that cannot be run, with where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {}{message}", location(file, *line), field.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct ScenarioError {
    /// The file.
    pub file: String,
    /// The line, when known.
    pub line: Option<usize>,
    /// The field path (`drainer.cap`, `fault[1].mix`), when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

fn location(file: &str, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{file}:{line}"),
        None => file.to_string(),
    }
}

/// The 1-based line of byte offset `at`.
pub(super) fn line_at(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// The line where the field at `path` (`a.b`, `fault[2].mix`) is written, if found.
pub fn locate(text: &str, path: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let root = DeTable::parse(text).ok()?;
    let mut span = root.span();
    let mut value: Option<&toml::Spanned<DeValue>> = None;
    let mut table = Some(root.get_ref());
    for segment in path.split('.') {
        let (key, index) = match segment.split_once('[') {
            Some((key, rest)) => (key, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (segment, None),
        };
        let mut next = match (table, value) {
            (Some(t), _) => t.get(key)?,
            (None, Some(v)) => v.get_ref().get(key)?,
            _ => return None,
        };
        if let Some(i) = index {
            next = next.get_ref().get(i)?;
        }
        span = next.span();
        value = Some(next);
        table = None;
    }
    Some(line_at(text, span.start))
}
