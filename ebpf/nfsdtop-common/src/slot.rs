//! The tracepoint table: every tracepoint nfsdtop watches, as a [`Slot`],
//! with its event name, its classic and raw programs, and what the raw
//! program's arguments are. The BPF programs, the agent's maps, decoder,
//! attach plan, loss accounting and outputs are all keyed by it.

/// What a raw-tracepoint program's argument 0 points to (as the kernel's
/// BTF must declare it for the program to be used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawArg {
    /// `struct svc_xprt *`: the transport itself.
    Xprt,
    /// `struct svc_rqst *`: a request; the transport is its `rq_xprt`.
    Rqst,
}

impl RawArg {
    /// The struct's name in the kernel's BTF.
    pub const fn btf_struct(self) -> &'static str {
        match self {
            RawArg::Xprt => "svc_xprt",
            RawArg::Rqst => "svc_rqst",
        }
    }
}

/// A slot's raw-tracepoint program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawProgram {
    /// The program's (function's) name in the BPF object.
    pub name: &'static str,
    /// What its argument 0 is.
    pub arg: RawArg,
    /// Argument 1 may be the transport's flags word as the kernel tested
    /// it (svc_xprt_enqueue on 6.6+): the program may read it (the kernel
    /// refuses to attach a program that reads past a tracepoint's
    /// arguments, so only slots whose tracepoint has two may).
    pub flags_arg: bool,
    /// Raw programs attach in this order, lowest first: the ones that make
    /// the kernel side forget a transport (svc_xprt_free, svc_xprt_accept)
    /// before any that sends one in full, so that no transport can be
    /// freed unseen (its pointer would stay known, and a new transport at
    /// the same address would get short records).
    pub attach_rank: u8,
    /// The typed (`tp_btf`) program that takes its place where the kernel
    /// allows (see `crate::typed`): slots whose argument's fields the raw
    /// program reads per hit, which the typed one reads with plain loads.
    pub typed: Option<&'static str>,
    /// The raw program that does this one's (or the typed one's) work for
    /// hits the kernel skipped it for, where the kernel can preempt them
    /// (see `crate::twin`). Only for tracepoints that fire in thread
    /// context (nfsd's and lockd's threads), never nested by an interrupt
    /// in the same thread: a nested hit would take the thread's mark.
    pub rescue: Option<&'static str>,
}

/// One tracepoint: its row of [`SLOTS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    /// The sunrpc event (and raw tracepoint) name; also how outputs name
    /// the slot's counts.
    pub event: &'static str,
    /// Older kernels' names for the same event, tried in order when
    /// `event` does not exist.
    pub old_names: &'static [&'static str],
    /// The classic tracepoint program's (function's) name.
    pub program: &'static str,
    /// The raw-tracepoint program, where the slot has one.
    pub raw: Option<RawProgram>,
}

/// Declares [`Slot`] (one variant per row, numbered in order),
/// [`Slot::ALL`], [`Slot::COUNT`] and [`SLOTS`] from one list of rows, so
/// that a tracepoint is added in one place.
macro_rules! slot_table {
    ($($(#[$doc:meta])* $variant:ident = $n:literal => $info:expr,)*) => {
        /// The tracepoints nfsdtop watches, one program (and one `CONFIG`
        /// entry) per slot: a program cannot tell which event fired
        /// (`common_type` is not valid from BPF), so each passes its own
        /// slot to the shared handler. Everything per tracepoint, in the
        /// kernel and in the agent, is keyed by it: arrays are indexed by
        /// `slot as usize`, names come from [`Slot::info`].
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Slot {
            $($(#[$doc])* $variant = $n,)*
        }

        impl Slot {
            /// Number of slots; the `CONFIG` and `RAWCONFIG` maps have this
            /// many entries.
            pub const COUNT: usize = [$($n),*].len();

            /// Every slot, in slot order.
            pub const ALL: [Slot; Slot::COUNT] = [$(Slot::$variant,)*];
        }

        /// The tracepoint table, in slot order.
        pub const SLOTS: [SlotInfo; Slot::COUNT] = [$($info,)*];
    };
}

// Adding a tracepoint: a row here (numbered next: the slot number is also
// the recording format's tracepoint code, so rows are only ever added at
// the end), its programs in `ebpf/nfsdtop-ebpf` named as the row says, and
// what its records mean in the agent (`source::live::layout` and
// `decode`, which the compiler points at).
slot_table! {
    Enqueue = 0 => SlotInfo {
        event: "svc_xprt_enqueue",
        // ≤ 5.16.
        old_names: &["svc_xprt_do_enqueue"],
        program: "svc_xprt_enqueue",
        raw: Some(RawProgram {
            name: "raw_svc_xprt_enqueue",
            arg: RawArg::Xprt,
            flags_arg: true,
            attach_rank: 2,
            typed: Some("typed_svc_xprt_enqueue"),
            rescue: None,
        }),
    },
    Dequeue = 1 => SlotInfo {
        event: "svc_xprt_dequeue",
        old_names: &[],
        program: "svc_xprt_dequeue",
        raw: Some(RawProgram {
            name: "raw_svc_xprt_dequeue",
            arg: RawArg::Rqst,
            flags_arg: false,
            attach_rank: 3,
            typed: Some("typed_svc_xprt_dequeue"),
            rescue: Some("rescue_svc_xprt_dequeue"),
        }),
    },
    StatsLatency = 2 => SlotInfo {
        event: "svc_stats_latency",
        old_names: &[],
        program: "svc_stats_latency",
        raw: Some(RawProgram {
            name: "raw_svc_stats_latency",
            arg: RawArg::Rqst,
            flags_arg: false,
            attach_rank: 4,
            typed: Some("typed_svc_stats_latency"),
            rescue: Some("rescue_svc_stats_latency"),
        }),
    },
    Accept = 3 => SlotInfo {
        event: "svc_xprt_accept",
        old_names: &[],
        program: "svc_xprt_accept",
        raw: Some(RawProgram {
            name: "raw_svc_xprt_accept",
            arg: RawArg::Xprt,
            flags_arg: false,
            attach_rank: 1,
            typed: None,
            rescue: Some("rescue_svc_xprt_accept"),
        }),
    },
    Close = 4 => SlotInfo {
        event: "svc_xprt_free",
        old_names: &[],
        program: "svc_xprt_free",
        raw: Some(RawProgram {
            name: "raw_svc_xprt_free",
            arg: RawArg::Xprt,
            flags_arg: false,
            attach_rank: 0,
            typed: None,
            rescue: Some("rescue_svc_xprt_free"),
        }),
    },
}

impl Slot {
    /// The slot numbered `n` (a ring record's `slot` byte).
    #[inline]
    pub const fn from_u8(n: u8) -> Option<Slot> {
        if (n as usize) < Slot::COUNT {
            Some(Slot::ALL[n as usize])
        } else {
            None
        }
    }

    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The slot's row of the tracepoint table.
    #[inline]
    pub const fn info(self) -> &'static SlotInfo {
        &SLOTS[self as usize]
    }

    /// The event's name (see [`SlotInfo::event`]).
    #[inline]
    pub const fn name(self) -> &'static str {
        self.info().event
    }

    /// Whether the slot's raw program may read the flags argument
    /// ([`RawProgram::flags_arg`]).
    #[inline]
    pub const fn raw_flags_arg(self) -> bool {
        match self.info().raw {
            Some(r) => r.flags_arg,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is in slot order, and names every program once.
    #[test]
    fn slot_table_is_consistent() {
        for (i, s) in Slot::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
            assert_eq!(Slot::from_u8(i as u8), Some(*s));
        }
        assert_eq!(Slot::from_u8(Slot::COUNT as u8), None);
        let mut names: Vec<&str> = SLOTS.iter().map(|i| i.program).collect();
        names.extend(SLOTS.iter().filter_map(|i| i.raw.map(|r| r.name)));
        names.extend(SLOTS.iter().filter_map(|i| i.raw.and_then(|r| r.rescue)));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a program named twice");
        let mut ranks: Vec<u8> = SLOTS
            .iter()
            .filter_map(|i| i.raw.map(|r| r.attach_rank))
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        assert_eq!(
            ranks.len(),
            SLOTS.iter().filter(|i| i.raw.is_some()).count()
        );
    }
}
