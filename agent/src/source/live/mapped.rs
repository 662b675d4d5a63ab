//! The BPF arrays the agent reads from memory: the per-CPU hit counters
//! (`COUNTERS`) and the per-transport execution totals (`EXEC_TOTALS`)
//! (the per-pool ones are `pools.rs`'s), all created with `BPF_F_MMAPABLE` and mapped read-only and shared.
//! Reading them takes plain atomic loads, no syscall: a map syscall holds
//! the CPU's `bpf_prog_active` while it can be preempted (kernels with
//! preemption full or lazy), and any tracepoint program that fires on that
//! CPU meanwhile is skipped (a recursion miss, counted as lost).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use aya::Ebpf;
use nfsdtop_common::{counter, exec::ExecTotals, xprt_table, Slot};

use super::error::{bpf_err, LiveError};

/// 8-byte words shared with the BPF programs (the mapped `PROC_ROWS`; a
/// plain array in tests).
pub trait Words {
    fn load(&self, w: usize) -> u64;
    fn store(&self, w: usize, v: u64);
}

/// A BPF array's value area, mapped read-only (or writable, inside a
/// [`Writable`]).
pub(super) struct Mapped {
    base: NonNull<u64>,
    words: usize,
}

// SAFETY: the mapping is plain shared memory, read with atomic loads only, and unmapped once (Drop).
unsafe impl Send for Mapped {}

impl Mapped {
    pub(super) fn map(ebpf: &Ebpf, name: &str, bytes: usize) -> Result<Mapped, LiveError> {
        Self::map_prot(ebpf, name, bytes, rustix::mm::ProtFlags::READ)
    }

    /// Mapped for writing too (`PROC_ROWS`, whose ownership only the agent
    /// writes): only such a mapping can be stored to, by type.
    pub(super) fn map_writable(
        ebpf: &Ebpf,
        name: &str,
        bytes: usize,
    ) -> Result<Writable, LiveError> {
        let prot = rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE;
        Self::map_prot(ebpf, name, bytes, prot).map(Writable)
    }

    fn map_prot(
        ebpf: &Ebpf,
        name: &str,
        bytes: usize,
        prot: rustix::mm::ProtFlags,
    ) -> Result<Mapped, LiveError> {
        let Some(aya::maps::Map::Array(data)) = ebpf.map(name) else {
            return Err(LiveError::Bpf {
                context: "the BPF object".into(),
                detail: format!("it has no {name} array"),
            });
        };
        // SAFETY: maps the value area of a BPF array created with BPF_F_MMAPABLE (at most its size), shared; unmapped in Drop.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                bytes,
                prot,
                rustix::mm::MapFlags::SHARED,
                data.fd(),
                0,
            )
        }
        .map_err(|e| {
            bpf_err(
                &format!("cannot map the {name} array"),
                &std::io::Error::from(e),
            )
        })?;
        let base = NonNull::new(p.cast()).ok_or_else(|| LiveError::Bpf {
            context: format!("the {name} array"),
            detail: "mapped at address 0".into(),
        })?;
        Ok(Mapped {
            base,
            words: bytes / 8,
        })
    }

    /// Word `w` as the programs last wrote it (0 beyond the end).
    pub(super) fn word(&self, w: usize) -> u64 {
        if w >= self.words {
            return 0;
        }
        // SAFETY: an aligned u64 inside the mapping (w < words); the kernel writes it concurrently, hence an atomic load.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().wrapping_add(w)) }.load(Ordering::Acquire)
    }
}

/// A mapping made by [`Mapped::map_writable`]: the only kind stored to.
pub(super) struct Writable(Mapped);

impl Words for Writable {
    fn load(&self, w: usize) -> u64 {
        self.0.word(w)
    }

    fn store(&self, w: usize, v: u64) {
        let m = &self.0;
        if w < m.words {
            // SAFETY: an aligned u64 inside a writable mapping (w < words); the programs read it concurrently, hence an atomic store.
            unsafe { AtomicU64::from_ptr(m.base.as_ptr().wrapping_add(w)) }
                .store(v, Ordering::Release);
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; nothing reads it after this.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.words * 8) };
    }
}

/// Per-slot totals summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotCounts {
    pub seen: u64,
    pub submitted: u64,
    pub lost: u64,
    pub busy: u64,
    /// Added to the kernel's per-transport execution totals, not sent.
    pub folded: u64,
    /// Hits the slot's rescue program did (`nfsdtop_common::twin`): also
    /// in the outcome they had, so not in `seen` again.
    pub rescued: u64,
}

/// The `COUNTERS` array: [`counter::STRIDE`] words per possible CPU.
pub struct Counters {
    map: Mapped,
    cpus: usize,
}

impl Counters {
    /// Possible CPUs: the array holds [`counter::STRIDE`] entries for each
    /// (sized at load by `bpf::open`, mapped here at the same size).
    pub fn cpus() -> Result<usize, LiveError> {
        aya::util::nr_cpus().map_err(|(what, e)| bpf_err(&format!("cannot read {what}"), &e))
    }

    pub fn map(ebpf: &Ebpf) -> Result<Counters, LiveError> {
        let cpus = Self::cpus()?;
        let bytes = cpus * counter::STRIDE as usize * 8;
        Ok(Counters {
            map: Mapped::map(ebpf, "COUNTERS", bytes)?,
            cpus,
        })
    }

    fn sum(&self, idx: u32) -> u64 {
        (0..self.cpus)
            .map(|cpu| self.map.word(cpu * counter::STRIDE as usize + idx as usize))
            .fold(0u64, u64::saturating_add)
    }

    pub fn read(&self) -> [SlotCounts; Slot::COUNT] {
        let mut out = [SlotCounts::default(); Slot::COUNT];
        for (s, o) in out.iter_mut().enumerate() {
            let base = s as u32 * counter::COUNT;
            let (submitted, lost, busy, folded) = (
                self.sum(base + counter::SUBMITTED),
                self.sum(base + counter::LOST),
                self.sum(base + counter::BUSY),
                self.sum(base + counter::FOLDED),
            );
            *o = SlotCounts {
                // Every handled hit is counted in exactly one of these.
                seen: [lost, busy, folded, self.sum(base + counter::DISABLED)]
                    .iter()
                    .fold(submitted, |a, &b| a.saturating_add(b)),
                submitted,
                lost,
                busy,
                folded,
                rescued: self.sum(base + counter::RESCUED),
            };
        }
        out
    }
}

/// The `EXEC_TOTALS` array (`nfsdtop_common::exec`): the kernel's running
/// execution totals of each known transport.
pub struct ExecTotalsMap {
    map: Mapped,
}

const _: () =
    assert!(size_of::<ExecTotals>() == 48 && std::mem::offset_of!(ExecTotals, bytes_out) == 40);
const EXEC_TOTALS_BYTES: usize = xprt_table::SLOTS as usize * size_of::<ExecTotals>();

impl ExecTotalsMap {
    pub fn map(ebpf: &Ebpf) -> Result<ExecTotalsMap, LiveError> {
        Ok(ExecTotalsMap {
            map: Mapped::map(ebpf, "EXEC_TOTALS", EXEC_TOTALS_BYTES)?,
        })
    }

    /// Who holds entry `idx` now: its owner and the gen of that claim
    /// (what `procs::RowClaims` keys a procedure row to).
    pub fn claim(&self, idx: u32) -> Option<(u64, u64)> {
        self.read(idx).map(|t| (t.owner, t.gen))
    }

    /// Entry `idx`, if it held still while read: the programs write
    /// `owner` and `gen` only when an entry changes hands, so both read
    /// the same before and after the sums means they all belong
    /// together.
    pub fn read(&self, idx: u32) -> Option<ExecTotals> {
        if idx >= xprt_table::SLOTS {
            return None;
        }
        // ExecTotals is six u64 words: owner, gen, us, count, bytes_in, bytes_out.
        let at = idx as usize * 6;
        let load = |w: usize| self.map.word(at + w);
        let (owner, gen) = (load(0), load(1));
        let (us, count) = (load(2), load(3));
        let (bytes_in, bytes_out) = (load(4), load(5));
        let same = load(0) == owner && load(1) == gen;
        same.then_some(ExecTotals {
            owner,
            gen,
            us,
            count,
            bytes_in,
            bytes_out,
        })
    }
}
