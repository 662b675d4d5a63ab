//! Kernel generation detection and the per-slot field layout the BPF
//! programs use, both derived from the running kernel's format files
//! (detect by which events and fields exist, never by version number,
//! never hard-code offsets; the kernel table of docs/book/src/kernel-support.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nfsdtop_common::{Slot, SlotConfig, ADDR_MAX, OFF_NONE, RAW_BYTES, SLOTS};

use super::error::LiveError;
use super::format::{Field, Format};
use crate::model::WaitSource;

/// Events nfsdtop reads (and doctor reports): every slot's event in slot
/// order, then the older names some of them had (`svc_xprt_do_enqueue`,
/// ≤5.16), from the tracepoint table.
pub fn event_names() -> impl Iterator<Item = &'static str> {
    SLOTS
        .iter()
        .map(|i| i.event)
        .chain(SLOTS.iter().flat_map(|i| i.old_names.iter().copied()))
}

/// An older kernel's name of a slot's event (see [`event_names`]).
pub fn is_old_name(event: &str) -> bool {
    SLOTS.iter().any(|i| i.old_names.contains(&event))
}

/// The tracepoint generations (docs/book/src/kernel-support.md's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generation {
    /// ≤ 5.17: the address is a text string. Not supported.
    TextAddr,
    /// 5.18 – 6.5: sockaddr fields; enqueue fires only on a real enqueue.
    G518,
    /// 6.6 – 6.15: enqueue fires on every attempt (BUSY records are not
    /// enqueues).
    G66,
    /// 6.16+: dequeue carries `qtime`.
    G616,
}

impl Generation {
    pub fn label(self) -> &'static str {
        match self {
            Generation::TextAddr => "≤5.17",
            Generation::G518 => "5.18-6.5",
            Generation::G66 => "6.6+",
            Generation::G616 => "6.16+",
        }
    }
}

/// Everything the live source needs to know about this kernel's events.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub generation: Generation,
    /// svc_xprt_dequeue has `qtime` (µs on the ready queue).
    pub qtime: bool,
    /// svc_xprt_dequeue has the proposed `class` field.
    pub kernel_class: bool,
    /// The BUSY flag (from `print fmt`, else bit 0).
    pub busy_mask: u64,
    /// One config per slot, ready for the BPF `CONFIG` map.
    pub slots: [SlotConfig; Slot::COUNT],
    /// The kernel event name attached for each slot (None = not used).
    pub events: [Option<String>; Slot::COUNT],
    /// svc_stats_latency's `procedure` (`__data_loc char[]`, the kernel's
    /// `pc_name`): where its location word is in the classic record;
    /// `OFF_NONE` where the record has none.
    pub procedure_loc: u16,
    /// Things that work less well than they could on this kernel.
    pub notes: Vec<String>,
}

impl Layout {
    /// Leave slot `s` unattached (its events are not watched).
    pub fn unhook(&mut self, s: Slot) {
        self.slots[s as usize] = SlotConfig::DISABLED;
        self.events[s as usize] = None;
    }

    /// e.g. "6.16+", "6.6+ +class".
    pub fn label(&self) -> String {
        let mut s = self.generation.label().to_string();
        if self.kernel_class {
            s.push_str(" +class");
        }
        s
    }

    pub fn wait_source(&self) -> WaitSource {
        if self.qtime {
            WaitSource::Qtime
        } else {
            WaitSource::EnqueueDequeue
        }
    }

    /// Read the sunrpc format files under `tracefs` and derive the layout.
    pub fn from_tracefs(tracefs: &Path) -> Result<Layout, LiveError> {
        let formats = read_formats(tracefs)?;
        Layout::from_formats(&formats, &tracefs.join("events/sunrpc"))
    }

    /// `formats`: event name → parsed format (only events that exist).
    /// `dir` is only used to name files in messages.
    pub fn from_formats(
        formats: &BTreeMap<String, Format>,
        dir: &Path,
    ) -> Result<Layout, LiveError> {
        let path = |ev: &str| dir.join(ev).join("format");
        let unsupported =
            |ev: &str, field: Option<&str>, reason: String| LiveError::UnsupportedFormat {
                event: ev.to_string(),
                field: field.map(str::to_string),
                reason,
                path: path(ev),
            };
        let mut notes = Vec::new();

        // A slot's event under its name, else under an older one.
        let find = |s: Slot| {
            let i = s.info();
            std::iter::once(i.event)
                .chain(i.old_names.iter().copied())
                .find_map(|n| formats.get(n).map(|f| (n, f)))
        };
        let deq_name = Slot::Dequeue.name();
        let Some((_, deq)) = find(Slot::Dequeue) else {
            return Err(unsupported(
                deq_name,
                None,
                "the event does not exist although other sunrpc events do".into(),
            ));
        };
        let Some((enq_name, enq)) = find(Slot::Enqueue) else {
            let names = std::iter::once(Slot::Enqueue.name())
                .chain(Slot::Enqueue.info().old_names.iter().copied())
                .collect::<Vec<_>>()
                .join(" nor ");
            return Err(unsupported(
                Slot::Enqueue.name(),
                None,
                format!("neither {names} exists"),
            ));
        };

        // ≤ 5.17: a text `addr` and no sockaddr `client`.
        for (name, f) in [(deq_name, deq), (enq_name, enq)] {
            if f.field("client").is_none() && f.field("addr").is_some() {
                return Err(unsupported(
                    name,
                    Some("client"),
                    format!(
                        "it has no `client` field, only a text `addr` (kernel ≤ 5.17, generation {}); \
                         nfsdtop needs the sockaddr fields of kernel 5.18 or later",
                        Generation::TextAddr.label()
                    ),
                ));
            }
        }

        let qtime = deq.field("qtime").is_some();
        let generation = if enq.field("pid").is_some() {
            Generation::G518
        } else if qtime {
            Generation::G616
        } else {
            Generation::G66
        };

        let flags = enq.print_flags("flags");
        let busy_mask = flags
            .get("BUSY")
            .or_else(|| flags.get("XPT_BUSY"))
            .copied()
            .filter(|m| *m != 0)
            .unwrap_or(1);

        let mut slots = [SlotConfig::DISABLED; Slot::COUNT];
        let mut events: [Option<String>; Slot::COUNT] = Default::default();

        // Enqueue: flags required; on 6.6+ BUSY attempts are dropped in BPF.
        let mut c = endpoint(enq_name, enq, &unsupported)?;
        let (o, s) = scalar(enq_name, enq, "flags", &[4, 8], &unsupported)?;
        (c.flags_off, c.flags_size) = (o, s);
        c.drop_mask = if generation == Generation::G518 {
            0
        } else {
            busy_mask
        };
        // 6.6+: the tracepoint fires in svc_xprt_ready() before its tests;
        // without one of these flags the transport is not enqueued (a
        // listener with nothing pending, say). Names from `print fmt`.
        if generation != Generation::G518 {
            let need: u64 = ["CONN", "CLOSE", "HANDSHAKE", "DATA", "DEFERRED"]
                .iter()
                .filter_map(|n| {
                    flags
                        .get(*n)
                        .or_else(|| flags.get(format!("XPT_{n}").as_str()))
                        .copied()
                })
                .fold(0, |m, b| m | b);
            if need == 0 {
                notes.push(
                    "svc_xprt_enqueue's print fmt names no CONN/DATA flags: every non-BUSY \
                     enqueue record counts as an enqueue (backlog may be overstated)"
                        .into(),
                );
            }
            c.need_mask = need;
        }
        slots[Slot::Enqueue as usize] = c;
        events[Slot::Enqueue as usize] = Some(enq_name.into());

        // Dequeue: qtime and class when the kernel has them.
        let mut c = endpoint(deq_name, deq, &unsupported)?;
        let (o, s) = scalar(deq_name, deq, "flags", &[4, 8], &unsupported)?;
        (c.flags_off, c.flags_size) = (o, s);
        if qtime {
            let (o, s) = scalar(deq_name, deq, "qtime", &[4, 8], &unsupported)?;
            (c.value_off, c.value_size) = (o, s);
        }
        let kernel_class = deq.field("class").is_some();
        if kernel_class {
            let (o, s) = scalar(deq_name, deq, "class", &[1, 2, 4, 8], &unsupported)?;
            (c.class_off, c.class_size) = (o, s);
        }
        slots[Slot::Dequeue as usize] = c;
        events[Slot::Dequeue as usize] = Some(deq_name.into());

        // Execution time, and the request's procedure where the record
        // names it.
        let mut procedure_loc = OFF_NONE;
        match find(Slot::StatsLatency) {
            Some((ev, f)) => {
                if f.field("procedure").is_some() {
                    procedure_loc = data_loc(ev, f, "procedure", &unsupported)?;
                }
                let mut c = endpoint(ev, f, &unsupported)?;
                let (o, s) = scalar(ev, f, "execute", &[4, 8], &unsupported)?;
                (c.value_off, c.value_size) = (o, s);
                slots[Slot::StatsLatency as usize] = c;
                events[Slot::StatsLatency as usize] = Some(ev.into());
            }
            None => notes.push(format!(
                "{} is missing: no execution times",
                Slot::StatsLatency.name()
            )),
        }

        // Connections (the socket table seeds them at start).
        for sl in [Slot::Accept, Slot::Close] {
            match find(sl) {
                Some((ev, f)) => {
                    slots[sl as usize] = endpoint(ev, f, &unsupported)?;
                    events[sl as usize] = Some(ev.into());
                }
                None => notes.push(format!(
                    "{} is missing: connection counts come from the socket table at start only",
                    sl.name()
                )),
            }
        }

        Ok(Layout {
            generation,
            qtime,
            kernel_class,
            busy_mask,
            slots,
            events,
            procedure_loc,
            notes,
        })
    }
}

type Unsupported<'a> = dyn Fn(&str, Option<&str>, String) -> LiveError + 'a;

/// server/client `__data_loc` sockaddrs and `netns_ino`: every endpoint
/// event has them.
fn endpoint(ev: &str, f: &Format, unsupported: &Unsupported<'_>) -> Result<SlotConfig, LiveError> {
    let mut c = SlotConfig::DISABLED;
    c.enabled = 1;
    c.server_off = data_loc(ev, f, "server", unsupported)?;
    c.client_off = data_loc(ev, f, "client", unsupported)?;
    addresses_fit(ev, f, unsupported)?;
    let (o, s) = scalar(ev, f, "netns_ino", &[4, 8], unsupported)?;
    (c.netns_off, c.netns_size) = (o, s);
    Ok(c)
}

fn need<'f>(
    ev: &str,
    f: &'f Format,
    name: &str,
    unsupported: &Unsupported<'_>,
) -> Result<&'f Field, LiveError> {
    f.field(name).ok_or_else(|| {
        unsupported(
            ev,
            Some(name),
            format!(
                "it has no `{name}` field (fields: {})",
                f.own_fields().join(", ")
            ),
        )
    })
}

/// Where a field is, if it lies within the bytes the BPF programs copy
/// (`RAW_BYTES` from the record start, common fields excluded).
fn offset16(ev: &str, fld: &Field, unsupported: &Unsupported<'_>) -> Result<u16, LiveError> {
    let end = u64::from(fld.offset) + u64::from(fld.size);
    u16::try_from(fld.offset)
        .ok()
        .filter(|o| *o != OFF_NONE && *o >= 8 && end <= RAW_BYTES as u64)
        .ok_or_else(|| {
            unsupported(
                ev,
                Some(&fld.name),
                format!(
                    "`{}` is at bytes {}..{end} of the record, outside the bytes 8..{RAW_BYTES} \
                     that nfsdtop's BPF programs copy",
                    fld.name, fld.offset
                ),
            )
        })
}

/// The two sockaddrs follow the fixed fields: with the largest
/// (`sockaddr_in6`) both must still fit in the copy.
fn addresses_fit(ev: &str, f: &Format, unsupported: &Unsupported<'_>) -> Result<(), LiveError> {
    let fixed_end = f
        .fields
        .iter()
        .map(|fl| u64::from(fl.offset) + u64::from(fl.size))
        .max()
        .unwrap_or(0);
    let need = fixed_end + 2 * ADDR_MAX as u64;
    if need > RAW_BYTES as u64 {
        return Err(unsupported(
            ev,
            None,
            format!(
                "its fixed fields end at byte {fixed_end}, so two IPv6 addresses after them \
                 would end at byte {need}, beyond the {RAW_BYTES} bytes nfsdtop's BPF programs copy"
            ),
        ));
    }
    Ok(())
}

fn data_loc(
    ev: &str,
    f: &Format,
    name: &str,
    unsupported: &Unsupported<'_>,
) -> Result<u16, LiveError> {
    let fld = need(ev, f, name, unsupported)?;
    if !fld.data_loc || fld.size != 4 {
        return Err(unsupported(
            ev,
            Some(name),
            format!(
                "`{name}` is `{}` of {} bytes, not a 4-byte __data_loc",
                fld.ty, fld.size
            ),
        ));
    }
    offset16(ev, fld, unsupported)
}

fn scalar(
    ev: &str,
    f: &Format,
    name: &str,
    sizes: &[u32],
    unsupported: &Unsupported<'_>,
) -> Result<(u16, u16), LiveError> {
    let fld = need(ev, f, name, unsupported)?;
    if fld.data_loc || fld.array_len.is_some() || !sizes.contains(&fld.size) {
        return Err(unsupported(
            ev,
            Some(name),
            format!(
                "`{name}` is `{}` of {} bytes; expected an integer of {} bytes",
                fld.ty,
                fld.size,
                sizes
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        ));
    }
    Ok((offset16(ev, fld, unsupported)?, fld.size as u16))
}

/// Parse the format file of every event of [`event_names`] that exists under
/// `tracefs/events/sunrpc`. A missing sunrpc directory is "no nfsd".
pub fn read_formats(tracefs: &Path) -> Result<BTreeMap<String, Format>, LiveError> {
    let dir = tracefs.join("events/sunrpc");
    if !dir.is_dir() {
        return Err(LiveError::NoSunrpc {
            detail: format!(
                "{} does not exist (the sunrpc module is not loaded)",
                dir.display()
            ),
        });
    }
    let mut out = BTreeMap::new();
    for ev in event_names() {
        let p: PathBuf = dir.join(ev).join("format");
        match std::fs::read_to_string(&p) {
            Ok(text) => {
                let f = Format::parse(&text).map_err(|e| LiveError::UnsupportedFormat {
                    event: ev.to_string(),
                    field: None,
                    reason: format!("cannot parse it: {e}"),
                    path: p.clone(),
                })?;
                out.insert(ev.to_string(), f);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(LiveError::Privileges {
                    detail: format!("cannot read {}: {e}", p.display()),
                })
            }
            Err(e) => {
                return Err(LiveError::Io {
                    path: p,
                    reason: e.to_string(),
                })
            }
        }
    }
    Ok(out)
}
