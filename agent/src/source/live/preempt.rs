//! Whether this kernel can preempt a raw tracepoint program, found before
//! anything is attached, so that on such kernels the programs that count
//! dispatches and requests get twins (`nfsdtop_common::twin`).
//!
//! The kernel runs a raw tracepoint program through `__bpf_trace_run`,
//! which counts runs per CPU in `prog->active` and skips a hit (a
//! recursion miss: `bpf_prog_inc_misses_counter`) while another run of the
//! same program is under way on that CPU. With preemption off around the
//! tracepoint's callbacks, that only happens to a hit from an interrupt
//! nested in a run. Since 7.0 the callbacks can run under SRCU-fast with
//! only migration off: then, on a kernel whose preemption model lets
//! kernel code be preempted (full, lazy, RT), a thread preempted inside
//! the program leaves `active` set while the next thread on that CPU hits
//! the same tracepoint, and that hit is lost. A classic tracepoint
//! program runs from the perf callback, which turns preemption off itself
//! (`perf_trace_##call`, then `trace_call_bpf`), so it is not preempted,
//! but the kernel builds the hit's record first, which costs more than a
//! second raw program.
//! Seen on Debian's 7.2 (preemption lazy): 10-20 raw misses a run at the
//! VM tests' load, none on its classic tracepoints, none on 6.1 and 6.12
//! (preemption voluntary).
//!
//! Read, in order: the preemption model (`/sys/kernel/debug/sched/preempt`
//! under PREEMPT_DYNAMIC, the `preempt=` boot option, `uname -v`, the
//! kernel's config in /boot) and whether the kernel has SRCU-fast
//! (`init_srcu_struct_fast` in /proc/kallsyms). Where either is unknown,
//! raw tracepoints stay the default and the hand-over to classic at the
//! first miss (`LiveSource::count_skipped_runs`) covers it.

use std::fmt;
use std::path::Path;

/// The kernel's preemption model, as `/sys/kernel/debug/sched/preempt`
/// names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    None,
    Voluntary,
    Full,
    Lazy,
    Rt,
}

impl Model {
    fn parse(word: &str) -> Option<Model> {
        Some(match word {
            "none" => Model::None,
            "voluntary" => Model::Voluntary,
            "full" => Model::Full,
            "lazy" => Model::Lazy,
            "rt" => Model::Rt,
            _ => return None,
        })
    }

    /// Kernel code outside preempt-disabled sections can be preempted.
    pub fn preempts_kernel_code(self) -> bool {
        matches!(self, Model::Full | Model::Lazy | Model::Rt)
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Model::None => "none",
            Model::Voluntary => "voluntary",
            Model::Full => "full",
            Model::Lazy => "lazy",
            Model::Rt => "rt",
        })
    }
}

/// What the kernel says, as read (None: not there or not readable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelFacts {
    /// `/sys/kernel/debug/sched/preempt` (needs debugfs).
    pub sched_preempt: Option<String>,
    /// /proc/cmdline.
    pub cmdline: Option<String>,
    /// `uname -v` (/proc/sys/kernel/version).
    pub version: Option<String>,
    /// `/boot/config-<release>`.
    pub config: Option<String>,
    /// `init_srcu_struct_fast` is in /proc/kallsyms (None: unreadable).
    pub srcu_fast: Option<bool>,
}

/// Where the facts are (tests point it at fixture trees).
pub const SCHED_PREEMPT: &str = "/sys/kernel/debug/sched/preempt";

impl KernelFacts {
    /// Read this kernel's facts.
    pub fn read() -> KernelFacts {
        let text = |p: &Path| std::fs::read_to_string(p).ok();
        let release = super::host::kernel_release();
        KernelFacts {
            sched_preempt: text(Path::new(SCHED_PREEMPT)),
            cmdline: text(Path::new("/proc/cmdline")),
            version: text(Path::new("/proc/sys/kernel/version")),
            config: text(
                Path::new("/boot")
                    .join(format!("config-{release}"))
                    .as_path(),
            ),
            srcu_fast: text(Path::new("/proc/kallsyms"))
                .map(|k| kallsyms_has(&k, "init_srcu_struct_fast")),
        }
    }

    /// The preemption model in force and where it was read.
    pub fn model(&self) -> Option<(Model, &'static str)> {
        if let Some(m) = self
            .sched_preempt
            .as_deref()
            .and_then(current_in_sched_preempt)
        {
            return Some((m, SCHED_PREEMPT));
        }
        let version = self.version.as_deref().unwrap_or("");
        let words: Vec<&str> = version.split_whitespace().collect();
        if words.contains(&"PREEMPT_RT") {
            return Some((Model::Rt, "uname -v"));
        }
        if self.config_says("CONFIG_PREEMPT_RT") {
            return Some((Model::Rt, "the kernel's config"));
        }
        let dynamic =
            words.contains(&"PREEMPT_DYNAMIC") || self.config_says("CONFIG_PREEMPT_DYNAMIC");
        if dynamic {
            // The boot option chooses; the config's choice is the default.
            if let Some(m) = self.cmdline.as_deref().and_then(preempt_option) {
                return Some((m, "the preempt= boot option"));
            }
            return self
                .config_choice()
                .map(|m| (m, "the kernel's config (its default)"));
        }
        if words.contains(&"PREEMPT_LAZY") {
            return Some((Model::Lazy, "uname -v"));
        }
        if words.contains(&"PREEMPT") {
            return Some((Model::Full, "uname -v"));
        }
        if let Some(m) = self.config_choice() {
            return Some((m, "the kernel's config"));
        }
        // Built without PREEMPT*: uname -v would say so.
        self.version
            .as_ref()
            .map(|_| (Model::Voluntary, "uname -v (no PREEMPT)"))
    }

    fn config_says(&self, option: &str) -> bool {
        self.config
            .as_deref()
            .is_some_and(|c| c.lines().any(|l| l.strip_prefix(option) == Some("=y")))
    }

    /// The preemption model chosen in the config (the default under
    /// PREEMPT_DYNAMIC).
    fn config_choice(&self) -> Option<Model> {
        [
            ("CONFIG_PREEMPT_LAZY", Model::Lazy),
            ("CONFIG_PREEMPT", Model::Full),
            ("CONFIG_PREEMPT_VOLUNTARY", Model::Voluntary),
            ("CONFIG_PREEMPT_NONE", Model::None),
        ]
        .into_iter()
        .find(|(o, _)| self.config_says(o))
        .map(|(_, m)| m)
    }
}

/// `none voluntary full (lazy)`: the model in parentheses is in force.
fn current_in_sched_preempt(text: &str) -> Option<Model> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('(').and_then(|w| w.strip_suffix(')')))
        .and_then(Model::parse)
}

/// `preempt=full` on the kernel command line.
fn preempt_option(cmdline: &str) -> Option<Model> {
    cmdline
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("preempt="))
        .next_back()
        .and_then(Model::parse)
}

/// /proc/kallsyms lines are `ADDRESS TYPE NAME [MODULE]`.
fn kallsyms_has(kallsyms: &str, symbol: &str) -> bool {
    kallsyms
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some(symbol))
}

/// Whether raw tracepoint programs would miss hits here, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Start on classic tracepoints: raw ones can be preempted here.
    pub raw_misses: bool,
    /// For `doctor` and `source.detail`.
    pub reason: String,
}

impl Verdict {
    pub fn probe() -> Verdict {
        Verdict::from_facts(&KernelFacts::read())
    }

    /// Why every event starts on its classic tracepoint, if it does.
    pub fn classic_because(self) -> Option<String> {
        self.raw_misses.then_some(self.reason)
    }

    pub fn from_facts(f: &KernelFacts) -> Verdict {
        let (raw_misses, reason) = match (f.model(), f.srcu_fast) {
            (Some((m, from)), Some(true)) if m.preempts_kernel_code() => (
                true,
                format!(
                    "this kernel can preempt raw tracepoint programs (preemption {m}, from {from}; \
                     tracepoint callbacks under SRCU-fast), which makes them miss hits: classic \
                     tracepoints, whose programs run with preemption off"
                ),
            ),
            (Some((m, from)), _) if !m.preempts_kernel_code() => (
                false,
                format!(
                    "preemption {m} (from {from}): tracepoint programs are not preempted, raw \
                     tracepoints"
                ),
            ),
            (Some((m, from)), Some(false)) => (
                false,
                format!(
                    "preemption {m} (from {from}), but no SRCU-fast: tracepoint callbacks run \
                     with preemption off, raw tracepoints"
                ),
            ),
            (model, _) => (
                false,
                format!(
                    "{}: raw tracepoints, moved to classic ones at the first miss",
                    match model {
                        None => "the preemption model is unknown (no debugfs, boot config or \
                                 PREEMPT in uname -v)"
                            .to_string(),
                        Some((m, from)) => format!(
                            "preemption {m} (from {from}), SRCU-fast unknown (/proc/kallsyms \
                             unreadable)"
                        ),
                    }
                ),
            ),
        };
        Verdict { raw_misses, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SID_VERSION: &str = "#1 SMP PREEMPT_DYNAMIC Debian 7.2.13-1 (2026-10-28)\n";
    const TRIXIE_VERSION: &str = "#1 SMP PREEMPT_DYNAMIC Debian 6.12.117-1 (2026-09-02)\n";
    const SID_CONFIG: &str = "CONFIG_PREEMPT_BUILD=y\n# CONFIG_PREEMPT is not set\n\
        CONFIG_PREEMPT_LAZY=y\n# CONFIG_PREEMPT_RT is not set\nCONFIG_PREEMPT_COUNT=y\n\
        CONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_RCU=y\n";
    const TRIXIE_CONFIG: &str = "CONFIG_PREEMPT_BUILD=y\n# CONFIG_PREEMPT_NONE is not set\n\
        CONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT is not set\n# CONFIG_PREEMPT_RT is not set\n\
        CONFIG_PREEMPT_COUNT=y\nCONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
    const KALLSYMS_7: &str = "ffffffff81000000 T _stext\n\
        ffffffff8112a0b0 T init_srcu_struct_fast\nffffffffc0a01000 t svc_xprt_enqueue\t[sunrpc]\n";
    const KALLSYMS_6: &str = "ffffffff81000000 T _stext\nffffffff8112a0b0 T init_srcu_struct\n\
        0000000000000000 T init_srcu_struct_fast_not_this\n";

    fn facts(version: &str, config: Option<&str>, kallsyms: &str) -> KernelFacts {
        KernelFacts {
            sched_preempt: None,
            cmdline: Some("BOOT_IMAGE=/vmlinuz root=/dev/vda ro quiet".into()),
            version: Some(version.into()),
            config: config.map(str::to_string),
            srcu_fast: Some(kallsyms_has(kallsyms, "init_srcu_struct_fast")),
        }
    }

    #[test]
    fn debian_sid_7_2_lazy_with_srcu_fast_starts_classic() {
        let f = facts(SID_VERSION, Some(SID_CONFIG), KALLSYMS_7);
        assert_eq!(
            f.model(),
            Some((Model::Lazy, "the kernel's config (its default)"))
        );
        let v = Verdict::from_facts(&f);
        assert!(v.raw_misses, "{}", v.reason);
        assert!(v.reason.contains("preemption lazy"), "{}", v.reason);
    }

    #[test]
    fn debian_6_12_voluntary_stays_raw() {
        let f = facts(TRIXIE_VERSION, Some(TRIXIE_CONFIG), KALLSYMS_6);
        assert_eq!(f.model().map(|m| m.0), Some(Model::Voluntary));
        assert_eq!(f.srcu_fast, Some(false));
        let v = Verdict::from_facts(&f);
        assert!(!v.raw_misses, "{}", v.reason);
    }

    #[test]
    fn sched_preempt_and_the_boot_option_override_the_config_default() {
        let mut f = facts(SID_VERSION, Some(SID_CONFIG), KALLSYMS_7);
        f.cmdline = Some("root=/dev/vda preempt=voluntary".into());
        assert_eq!(f.model().map(|m| m.0), Some(Model::Voluntary));
        assert!(!Verdict::from_facts(&f).raw_misses);
        // debugfs says what is in force, whatever the rest says.
        f.sched_preempt = Some("none voluntary (full) lazy \n".into());
        assert_eq!(f.model(), Some((Model::Full, SCHED_PREEMPT)));
        assert!(Verdict::from_facts(&f).raw_misses);
        // A 6.12 booted with preempt=full: its tracepoints still turn
        // preemption off (no SRCU-fast), so raw stays.
        let mut f = facts(TRIXIE_VERSION, Some(TRIXIE_CONFIG), KALLSYMS_6);
        f.cmdline = Some("preempt=full".into());
        let v = Verdict::from_facts(&f);
        assert!(!v.raw_misses, "{}", v.reason);
        assert!(v.reason.contains("no SRCU-fast"), "{}", v.reason);
    }

    #[test]
    fn uname_alone_tells_rt_full_and_no_preemption() {
        let rt = facts("#1 SMP PREEMPT_RT Debian 7.2.13-1\n", None, KALLSYMS_7);
        assert_eq!(rt.model().map(|m| m.0), Some(Model::Rt));
        assert!(Verdict::from_facts(&rt).raw_misses);
        let full = facts("#1 SMP PREEMPT Fri Jan 1\n", None, KALLSYMS_7);
        assert_eq!(full.model().map(|m| m.0), Some(Model::Full));
        let plain = facts("#1 SMP Fri Jan 1\n", None, KALLSYMS_7);
        assert_eq!(plain.model().map(|m| m.0), Some(Model::Voluntary));
        assert!(!Verdict::from_facts(&plain).raw_misses);
    }

    #[test]
    fn unknown_model_or_kallsyms_keeps_raw_with_the_hand_over() {
        // PREEMPT_DYNAMIC with neither debugfs nor a config: unknown.
        let f = facts(SID_VERSION, None, KALLSYMS_7);
        assert_eq!(f.model(), None);
        let v = Verdict::from_facts(&f);
        assert!(!v.raw_misses);
        assert!(v.reason.contains("unknown"), "{}", v.reason);
        let mut f = facts(SID_VERSION, Some(SID_CONFIG), KALLSYMS_7);
        f.srcu_fast = None;
        let v = Verdict::from_facts(&f);
        assert!(!v.raw_misses);
        assert!(v.reason.contains("SRCU-fast unknown"), "{}", v.reason);
    }

    #[test]
    fn sample_parsers() {
        assert_eq!(
            current_in_sched_preempt("none voluntary full (lazy) \n"),
            Some(Model::Lazy)
        );
        assert_eq!(
            current_in_sched_preempt("(none) voluntary full\n"),
            Some(Model::None)
        );
        assert_eq!(current_in_sched_preempt("garbage\n"), None);
        assert_eq!(
            preempt_option("a preempt=lazy b preempt=full"),
            Some(Model::Full)
        );
        assert_eq!(preempt_option("preempt=bogus"), None);
        assert!(kallsyms_has(KALLSYMS_7, "svc_xprt_enqueue"));
        assert!(!kallsyms_has(KALLSYMS_6, "init_srcu_struct_fast"));
    }
}
