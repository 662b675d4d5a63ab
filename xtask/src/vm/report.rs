//! The outcome of one run's checks: every check's line (ok or FAIL, in
//! order) and the failures, printed together at the end.

pub struct Report {
    pub lines: Vec<String>,
    pub failures: Vec<String>,
}

impl Report {
    pub fn check(&mut self, ok: bool, what: impl Into<String>) {
        let what = what.into();
        if ok {
            self.lines.push(format!("  ok   {what}"));
        } else {
            self.lines.push(format!("  FAIL {what}"));
            self.failures.push(what);
        }
    }
    pub fn note(&mut self, what: impl Into<String>) {
        self.lines.push(format!("       {}", what.into()));
    }
}
