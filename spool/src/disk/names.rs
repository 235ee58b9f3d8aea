//! The names a directory listing found, in one buffer: a million entries are two
//! allocations, not a million. Open lists the entries directory of a whole backlog;
//! as one `String` per name, freeing them was a quarter of open's time at 100k
//! entries (docs/benchmarks-log.md, issue 31).

/// File names, in the order they were pushed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    /// Every name, one after another.
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<usize>,
}

impl Names {
    /// Adds `name` at the end.
    pub fn push(&mut self, name: &str) {
        self.text.push_str(name);
        self.ends.push(self.text.len());
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Name `i`, in the order pushed.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
        Some(&self.text[start..end])
    }

    /// The names, in the order pushed.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i).expect("i < len"))
    }

    /// The names as owned strings.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_string).collect()
    }
}

impl<S: AsRef<str>> FromIterator<S> for Names {
    fn from_iter<I: IntoIterator<Item = S>>(names: I) -> Self {
        let mut all = Names::default();
        for name in names {
            all.push(name.as_ref());
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_back_as_pushed_empty_ones_included() {
        let names: Names = ["a", "", "bc", "déjà"].into_iter().collect();
        assert_eq!(names.len(), 4);
        assert_eq!(names.to_vec(), ["a", "", "bc", "déjà"]);
        assert_eq!((names.get(2), names.get(4)), (Some("bc"), None));
        assert!(Names::default().is_empty());
    }
}
